"""The default weight type follows the CPU (bf16 with native bf16 dot products, else f16); a catalogue name
without a weight type still names a collection's recorded file of another weight type."""

from __future__ import annotations

from indexer.models.store import cpu_has_bf16, default_quant, model_path, names_catalogue_file

X86_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 amx_tile\n"
X86_PLAIN = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_bf16_is_read_from_the_cpu_flags():
    assert cpu_has_bf16(X86_BF16) and cpu_has_bf16(ARM_BF16)
    assert not cpu_has_bf16(X86_PLAIN) and not cpu_has_bf16("")


def test_the_default_file_is_this_cpus_weight_type(monkeypatch):
    monkeypatch.setattr("indexer.models.store.cpu_has_bf16", lambda cpuinfo=None: True)
    assert default_quant() == "bf16" and model_path("all-MiniLM-L6-v2").name == "all-MiniLM-L6-v2-bf16.gguf"
    monkeypatch.setattr("indexer.models.store.cpu_has_bf16", lambda cpuinfo=None: False)
    assert default_quant() == "f16" and model_path("all-MiniLM-L6-v2").name == "all-MiniLM-L6-v2-f16.gguf"
    assert model_path("all-MiniLM-L6-v2", "q8_0").name == "all-MiniLM-L6-v2-q8_0.gguf"  # named: never swapped


def test_a_plain_catalogue_name_names_any_weight_type_of_that_model():
    assert names_catalogue_file("all-MiniLM-L6-v2", "/cache/all-MiniLM-L6-v2-f16.gguf")
    assert names_catalogue_file("all-MiniLM-L6-v2", "/cache/all-MiniLM-L6-v2-bf16.gguf")
    assert not names_catalogue_file("all-MiniLM-L6-v2:q8_0", "/cache/all-MiniLM-L6-v2-f16.gguf")
    assert not names_catalogue_file("all-MiniLM-L6-v2", "/cache/other-f16.gguf")
    assert not names_catalogue_file("/models/x.gguf", "/models/x.gguf")
