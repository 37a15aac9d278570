"""The default weight type is the native probe's measured choice (the fastest type that runs here and passes the
quality gate), not a CPU-flag rule; a catalogue name without a weight type still names a collection's recorded
file of another weight type."""

from __future__ import annotations

from indexer.models.cache import default_quant, model_path, names_catalogue_file
from indexer.models.native import EXCLUDED, MIN_COSINE, RUNS, UNKNOWN, TypeVerdict, choose


def _v(quant: str, tps: float | None, runs: bool = True, cos: float | None = 0.99999,
       state: str = EXCLUDED) -> TypeVerdict:
    return TypeVerdict(quant, RUNS if runs else state, "" if runs else "killed by SIGILL", tps,
                       cos if runs else None)


def test_the_fastest_type_that_runs_and_passes_the_gate_is_chosen():
    assert choose([_v("f16", 4000), _v("bf16", 3000), _v("q8_0", 5000)]) == "q8_0"
    assert choose([_v("f16", 4000), _v("bf16", 5000), _v("q8_0", 4500)]) == "bf16"
    # a type that died in the probe is never chosen, however fast it would be
    assert choose([_v("f16", 4000), _v("bf16", 3000), _v("q8_0", None, runs=False)]) == "f16"
    # a type below the cosine gate is never chosen
    assert choose([_v("f16", 4000), _v("q8_0", 9000, cos=MIN_COSINE - 1e-4)]) == "f16"
    # a gain inside the probe's noise does not displace the preferred type
    assert choose([_v("f16", 4000), _v("bf16", 4100)]) == "f16"
    # nothing passes the gate (untimed, no f32 to compare with): the first fallback type that ran
    assert choose([_v("f16", None, cos=None), _v("q8_0", None, cos=None)]) == "f16"
    # f16 is no fallback unless it ran: here only bf16 ran
    assert choose([_v("f16", None, runs=False), _v("bf16", None, cos=None), _v("q8_0", None, runs=False)]) == "bf16"
    assert choose([_v("f16", None, runs=False, state=UNKNOWN), _v("f32", None, cos=None)]) == "f32"
    # nothing ran: no type ("" makes chosen_quant() raise, naming `indexer models probe --refresh`)
    assert choose([]) == "" and choose([_v("f16", None, runs=False)]) == ""


def test_only_an_excluded_type_or_an_unknown_one_after_its_last_try_is_refused():
    assert TypeVerdict("q8_0", EXCLUDED, "killed by SIGILL").refused
    assert not TypeVerdict("q8_0", UNKNOWN, "killed by SIGKILL", tries=1).refused
    assert TypeVerdict("q8_0", UNKNOWN, "killed by SIGKILL", tries=2).refused
    assert not TypeVerdict("q8_0", RUNS).refused and TypeVerdict("q8_0", RUNS).runs


def test_the_default_file_is_the_measured_weight_type(monkeypatch):
    monkeypatch.setattr("indexer.models.native.chosen_quant", lambda: "bf16")
    assert default_quant() == "bf16" and model_path("all-MiniLM-L6-v2").name == "all-MiniLM-L6-v2-bf16.gguf"
    monkeypatch.setattr("indexer.models.native.chosen_quant", lambda: "f16")
    assert default_quant() == "f16" and model_path("all-MiniLM-L6-v2").name == "all-MiniLM-L6-v2-f16.gguf"
    assert model_path("all-MiniLM-L6-v2", "q8_0").name == "all-MiniLM-L6-v2-q8_0.gguf"  # named: never swapped


def test_a_plain_catalogue_name_names_any_weight_type_of_that_model():
    assert names_catalogue_file("all-MiniLM-L6-v2", "/cache/all-MiniLM-L6-v2-f16.gguf")
    assert names_catalogue_file("all-MiniLM-L6-v2", "/cache/all-MiniLM-L6-v2-bf16.gguf")
    assert not names_catalogue_file("all-MiniLM-L6-v2:q8_0", "/cache/all-MiniLM-L6-v2-f16.gguf")
    assert not names_catalogue_file("all-MiniLM-L6-v2", "/cache/other-f16.gguf")
    assert not names_catalogue_file("/models/x.gguf", "/models/x.gguf")
