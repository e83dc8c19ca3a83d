"""Compact a JSONL data set of provider requests on Ray Data.

    python examples/ray_compact.py IN.jsonl OUT.jsonl --format openai-chat --max-tokens 8000

One request per input line; OUT.jsonl gets one line per input line, in order: the compacted
request, or ``null`` where a request failed, byte for byte what ``cutctx batch`` writes for
the same input and options. Ray starts a local cluster unless ``RAY_ADDRESS`` names one;
``--num-cpus`` bounds a local one.
"""

from __future__ import annotations

import argparse

import ray
import ray.data

from cutctx.formats import BatchCompactor


def compact_file(
    source: str, target: str, compactor: BatchCompactor, batch_size: int = 64
) -> None:
    """Compacts every line of ``source`` into ``target``, in the input's order."""
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    dataset = ray.data.read_text(source, drop_empty_lines=False)
    compacted = dataset.map_batches(compactor, batch_format="pyarrow", batch_size=batch_size)
    with open(target, "w", encoding="utf-8", newline="\n") as out:
        for batch in compacted.iter_batches(batch_format="pyarrow", batch_size=1024):
            for line in batch.column(compactor.column).to_pylist():
                out.write("null\n" if line is None else line + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--format", required=True)
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--policy", default="default_chain")
    parser.add_argument("--num-cpus", type=int, default=None)
    args = parser.parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    compactor = BatchCompactor(args.format, args.max_tokens, column="text", policy=args.policy)
    compact_file(args.source, args.target, compactor)


if __name__ == "__main__":
    main()
