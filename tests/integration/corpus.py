"""A small real corpus with distinct topics, written to disk for end-to-end tests."""

from __future__ import annotations

from pathlib import Path

DOCS = {
    "baking/bread.md": "# Baking bread\n\nMix flour, water, salt and yeast. Knead the dough for ten minutes, let it "
    "rise for an hour, shape the loaf and bake it in a hot oven until the crust is brown.\n\n## Sourdough\n\n"
    "A sourdough starter replaces commercial yeast; feed it flour and water every day.\n",
    "astronomy/planets.txt": "Jupiter is the largest planet in the solar system. Saturn has bright rings made of "
    "ice and rock. Mars is a cold desert planet with two small moons.\n",
    "code/retry.py": '"""Retry helpers."""\n\nimport time\n\n\ndef retry(fn, attempts=3, delay=0.5):\n'
    '    """Call fn until it succeeds, sleeping with exponential backoff between failed attempts."""\n'
    "    for i in range(attempts):\n        try:\n            return fn()\n        except Exception:\n"
    "            time.sleep(delay * 2**i)\n    raise RuntimeError('all attempts failed')\n",
    "garden/tomatoes.rst": "Growing tomatoes\n================\n\nPlant tomato seedlings after the last frost. "
    "Water them deeply twice a week and tie the stems to stakes as they grow.\n",
    "web/page.html": "<html><head><title>Bicycle repair</title><style>p{color:red}</style></head><body>"
    "<p>To fix a flat bicycle tire, remove the wheel, find the puncture and patch the inner tube.</p>"
    "<script>var hidden = 'never indexed';</script></body></html>",
}


def write_corpus(root: Path, docs: dict[str, str] = DOCS) -> Path:
    for rel, text in docs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_many(root: Path, n_files: int, paragraphs: int = 4) -> Path:
    """``n_files`` Markdown files of distinct, real-looking prose (for crash and concurrency tests)."""
    topics = ["rivers", "mountains", "violins", "databases", "volcanoes", "orchards", "glaciers", "compilers"]
    for i in range(n_files):
        topic = topics[i % len(topics)]
        body = "\n\n".join(
            f"Note {i}.{p} about {topic}: observation number {i * 31 + p} describes how {topic} change over "
            f"{p + 2} seasons, measured by team {i % 7} in region {p * 3 + i % 5}."
            for p in range(paragraphs)
        )
        path = root / f"d{i % 5}" / f"note-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {topic.title()} {i}\n\n{body}\n", encoding="utf-8")
    return root
