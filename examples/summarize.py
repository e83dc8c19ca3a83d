#!/usr/bin/env python3
"""A summarizer for `cutctx compact --summarize-with`, offline and deterministic: it reads one
summarization request on standard input (`{"format", "group_id", "prompt_id", "target_tokens",
"turns", "messages"}`) and prints a summary of about `target_tokens` tokens made of each turn's
role and first line. A real summarizer sends `messages` to a model instead; this one shows the
contract and lets the examples run without one.

    cutctx compact --format anthropic --max-tokens 2000 --reserve-output 500 \\
        --summarize-with 'python3 examples/summarize.py' examples/anthropic.json
"""

import json
import sys


def main():
    request = json.load(sys.stdin)
    budget = max(1, int(request["target_tokens"])) * 4  # characters, at about 4 per token
    lines = []
    for turn in request["turns"]:
        first = turn["content"].strip().splitlines()[0] if turn["content"].strip() else ""
        lines.append(f"{turn['role']}: {first[:120]}")
    text = "Earlier in this conversation: " + " | ".join(lines)
    print(text[:budget])


if __name__ == "__main__":
    sys.exit(main())
