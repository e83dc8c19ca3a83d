#!/usr/bin/env python3
"""Rebuild the held-out long-run set (data/heldout/): complete provider request bodies from real,
publicly licensed agent runs, read straight out of bare git snapshots of the source repositories at
pinned commits.

    MIRRORS=DIR python3 scripts/heldout-convert.py --out data/heldout [--stats]

`DIR` holds one bare git clone per source repository, as `<owner>+<name>/repo`:

  SWE-bench+SWE-smith/repo           SWE-smith (MIT)        SWE-agent 1.0.1 fixture trajectory (Claude 3.7 Sonnet)
  SWE-agent+SWE-agent/repo           SWE-agent (MIT)        SWE-agent 0.x test trajectory (gpt4); tool bundles
  SWE-agent+mini-swe-agent/repo      mini-swe-agent (MIT)   DeepSeek runs committed in pull requests #816/#854;
                                                            BASH_TOOL of v2.1.0
  zhu-yiqi+agent-data-protocol/repo  ADP (MIT)              rows of nebius/SWE-agent-trajectories (CC BY 4.0)
  NVIDIA-NeMo+Gym/repo               NeMo Gym (Apache-2.0)  example rollouts (OpenAI Responses items)

Every message text is copied unchanged (decoded from the source JSON and re-encoded). Only the
envelope changes: fields that are not part of the provider's message/item schema are dropped and
list/id shapes are mapped as documented per builder. A run whose last model turn issued calls that were
never answered ends at the last answered result (that turn is the answer to the final request, and a
request cannot hold unanswered calls). Each output is gzip -9 with mtime 0 (byte-for-byte reproducible).
Needs PyYAML (SWE-agent bundle configs).
"""
import argparse
import ast
import gzip
import io
import json
import os
import subprocess
import sys

MIRRORS = os.environ.get("MIRRORS", "")

SWE_SMITH = ("SWE-bench+SWE-smith/repo", "cf2e649d1eb41cd467421210da7ab8d67e47161e")
SWE_AGENT = ("SWE-agent+SWE-agent/repo", "2418998d51ac08c22f23751f1a238d7ec19eb6e5")  # = swe_agent_hash of the SWE-smith run
MSA_PR816 = ("SWE-agent+mini-swe-agent/repo", "ec0e8e849fea5b1619deb1753007201000904672")  # refs/pull/816/head
MSA_PR854 = ("SWE-agent+mini-swe-agent/repo", "9c0e0e7784f6a45a9ab1c952639055e592577f58")  # refs/pull/854/head
MSA_V210 = ("SWE-agent+mini-swe-agent/repo", "3a9b8e874d322a9cfb1f391ff4f4df67721c108c")   # tag v2.1.0
ADP = ("zhu-yiqi+agent-data-protocol/repo", "05546b4fc77edbd6adeb297721592bb64dd03d02")      # neulab PR #109
NEMO_GYM = ("NVIDIA-NeMo+Gym/repo", "07d6b0d07b22fcf530b4c211dae2ee23100428e4")

_cache = {}


def git_show(src, path):
    key = (src, path)
    if key not in _cache:
        gitdir, commit = src
        _cache[key] = subprocess.run(
            ["git", f"--git-dir={os.path.join(MIRRORS, gitdir)}", "show", f"{commit}:{path}"],
            check=True, capture_output=True).stdout.decode("utf-8")
    return _cache[key]


# ================================================================ Chat Completions builders
def swe_agent_tools(replay_config):
    """`tools` exactly as SWE-agent 1.0.1 builds it: its bash command when enable_bash_tool, then each
    bundle's config.yaml tools in order (hidden ones left out); Command.get_function_calling_tool shape."""
    import yaml
    tcfg = replay_config["agent"]["tools"]
    commands = []
    if tcfg.get("enable_bash_tool", True):
        commands.append({"name": "bash", "docstring": "runs the given command directly in bash",
                         "arguments": [{"name": "command", "type": "string",
                                        "description": "The bash command to execute.", "required": True}]})
    for bundle in tcfg["bundles"]:
        name = bundle["path"].rstrip("/").split("/")[-1]
        cfg = yaml.safe_load(git_show(SWE_AGENT, f"tools/{name}/config.yaml"))
        for tool, tc in (cfg.get("tools") or {}).items():
            if tool not in bundle.get("hidden_tools", []):
                commands.append(dict(tc, name=tool))
    tools = []
    for c in commands:
        props, required = {}, []
        for a in c.get("arguments") or []:
            props[a["name"]] = {"type": a["type"], "description": a["description"]}
            if a.get("items"):
                props[a["name"]]["items"] = a["items"]
            if a["required"]:
                required.append(a["name"])
            if a.get("enum"):
                props[a["name"]]["enum"] = a["enum"]
        tools.append({"type": "function", "function": {"name": c["name"], "description": c.get("docstring") or "",
                                                       "parameters": {"type": "object", "properties": props,
                                                                      "required": required}}})
    return tools


def swesmith_fc(instance):
    """SWE-smith fixture trajectory (SWE-agent 1.0.1, function calling). `history` -> messages: role,
    content (string or text parts, unchanged), tool_calls (id, type, function), tool_call_id (the single
    tool_call_ids entry). Dropped: thought/action (copies), agent, message_type, cache_control (an
    Anthropic marker of SWE-agent's history processor), tool_calls[].index (streaming field)."""
    traj = json.loads(git_show(SWE_SMITH, f"tests/test_logs/trajectories/{instance}/{instance}.traj"))
    rc = traj["replay_config"]
    rc = json.loads(rc) if isinstance(rc, str) else rc
    msgs = []
    for m in traj["history"]:
        out = {"role": m["role"], "content": m["content"]}
        if m["role"] == "assistant" and m.get("tool_calls"):
            out["tool_calls"] = [{"id": c["id"], "type": c["type"],
                                  "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                                 for c in m["tool_calls"]]
        if m["role"] == "tool":
            ids = m["tool_call_ids"]
            assert len(ids) == 1, ids
            out["tool_call_id"] = ids[0]
        msgs.append(out)
    mc = rc["agent"]["model"]
    return {"model": mc["name"], "temperature": mc["temperature"], "top_p": mc["top_p"], "messages": msgs,
            "tools": swe_agent_tools(rc)}, 0


def sweagent_v0(run_dir, instance):
    """SWE-agent 0.x test trajectory (text actions in ``` blocks, no tools). `history` -> messages (role,
    content unchanged; `agent` and `is_demo` dropped: the demonstration is a user message the model was
    sent). model/temperature/top_p from the run's args.yaml (`gpt4` is SWE-agent 0.x's alias, recorded as is)."""
    import yaml
    base = f"tests/test_data/trajectories/{run_dir}"
    traj = json.loads(git_show(SWE_AGENT, f"{base}/{instance}.traj"))
    args = yaml.safe_load(git_show(SWE_AGENT, f"{base}/args.yaml"))
    msgs = []
    for m in traj["history"]:
        assert isinstance(m["content"], str) and m["role"] in ("system", "user", "assistant"), m.keys()
        msgs.append({"role": m["role"], "content": m["content"]})
    mc = args["agent"]["model"]
    return {"model": mc["model_name"], "temperature": mc["temperature"], "top_p": mc["top_p"], "messages": msgs}, 0


def nebius(index, instance):
    """A raw nebius/SWE-agent-trajectories row as sampled by ADP: system -> its system_prompt, user ->
    user, ai -> assistant; texts unchanged; text actions, so no tools."""
    row = json.loads(git_show(ADP, "datasets/nebius_SWE-agent-trajectories/sample_raw.json"))[index]
    assert row["instance_id"] == instance, (row["instance_id"], instance)
    role = {"system": "system", "user": "user", "ai": "assistant"}
    msgs = []
    for t in row["trajectory"]:
        text = t["system_prompt"] if t["role"] == "system" else t["text"]
        assert isinstance(text, str), t
        msgs.append({"role": role[t["role"]], "content": text})
    return {"model": row["model_name"], "messages": msgs}, 0


def msa_tool(src):
    """mini-swe-agent's BASH_TOOL (a Chat Completions tool) from actions_toolcall.py at `src`."""
    code = git_show(src, "src/minisweagent/models/utils/actions_toolcall.py")
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "BASH_TOOL":
            return ast.literal_eval(node.value)
    raise KeyError("BASH_TOOL")


def msa_traj(src, path):
    """A mini-swe-agent 2.x tool-calling trajectory (.traj.json, `messages` in Chat Completions shape).
    Kept: role, content, tool_calls (id, type, function{name, arguments}), tool_call_id. Dropped: `extra`
    (mini-swe-agent metadata: raw output, timestamps, the provider's raw response), `function_call` and
    `provider_specific_fields` (null litellm fields), tool_calls[].index. The closing `exit` message
    (mini-swe-agent's record of the submission, never sent to the model) is left out, and so is the
    final submission turn whose call was never answered. model = the provider's reported model
    (extra.response.model); temperature and parallel_tool_calls from the run's model_kwargs; tools = the
    BASH_TOOL of the code at the same commit."""
    traj = json.loads(git_show(src, path))
    msgs, models = [], set()
    for m in traj["messages"]:
        if m["role"] == "exit":
            continue
        assert m["role"] in ("system", "user", "assistant", "tool"), m["role"]
        out = {"role": m["role"], "content": m["content"]}
        if m["role"] == "assistant":
            resp = (m.get("extra") or {}).get("response") or {}
            if resp.get("model"):
                models.add(resp["model"])
            if m.get("tool_calls"):
                out["tool_calls"] = [{"id": c["id"], "type": c["type"],
                                      "function": {"name": c["function"]["name"],
                                                   "arguments": c["function"]["arguments"]}}
                                     for c in m["tool_calls"]]
        if m["role"] == "tool":
            out["tool_call_id"] = m["tool_call_id"]
        msgs.append(out)
    msgs, dropped = chat_drop_unanswered_tail(msgs)
    assert len(models) == 1, models
    kw = traj["info"]["config"]["model"].get("model_kwargs") or {}
    body = {"model": models.pop()}
    for k in ("temperature", "parallel_tool_calls"):
        if k in kw:
            body[k] = kw[k]
    body["messages"] = msgs
    body["tools"] = [msa_tool(src)]
    return body, dropped


def chat_drop_unanswered_tail(msgs):
    """If the last assistant message has calls not all answered after it, the run stopped on that turn:
    leave it (and anything after it) out."""
    last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    calls = {c["id"] for c in msgs[last].get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in msgs[last + 1:] if m["role"] == "tool"}
    if calls - answered:
        assert not answered, "partly answered final turn"
        return msgs[:last], 1
    return msgs, 0


def check_chat(body):
    """OpenAI pairing: each assistant turn's calls answered right after it, by position, one tool
    message per call; no tool message without its call; no empty request."""
    msgs = body["messages"]
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert m["role"] in ("system", "user", "assistant", "tool"), m["role"]
        if m["role"] == "tool":
            raise AssertionError(f"tool result without its call at {i}")
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            got = []
            j = i + 1
            while j < len(msgs) and msgs[j]["role"] == "tool":
                got.append(msgs[j]["tool_call_id"])
                j += 1
            assert sorted(got) == sorted(ids), (i, ids, got)
            i = j
            continue
        i += 1
    assert msgs[0]["role"] in ("system", "user")


# ================================================================ OpenAI Responses builders (NeMo Gym)
NEMO_ITEM_EXTRAS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


def is_model_item(it):
    t = it.get("type", "message")
    return t in ("reasoning", "function_call") or (t == "message" and it.get("role") == "assistant")


def nemo_rollout(path, row_index, expect, add_msa_tool=False):
    """A NeMo Gym example rollout row: request = responses_create_params.input (a string becomes one user
    message item) + response.output, as the Responses `input` list. Items are copied unchanged except
    NeMo Gym's training fields (prompt/generation token ids, log probs, routed experts) which are not part
    of a Responses item, and `id`/`status` keys recorded as null (optional envelope fields that the
    provider never sends as null). `instructions`, `tools`, `temperature`, `top_p`, `parallel_tool_calls` and
    `tool_choice` as recorded in responses_create_params (when set); model = response.model. mini-swe-agent
    rows record `tools: []` because the agent adds its tool itself: there the tool is mini-swe-agent
    v2.1.0's BASH_TOOL in the Responses function-tool shape (add_msa_tool)."""
    lines = [l for l in git_show(NEMO_GYM, path).splitlines() if l.strip()]
    row = json.loads(lines[row_index])
    rcp, resp = row["responses_create_params"], row["response"]
    ident = row.get("instance_id") or (rcp.get("metadata") or {}).get("instance_id")
    assert ident == expect, (ident, expect)
    inp = rcp["input"]
    if isinstance(inp, str):
        inp = [{"role": "user", "content": inp}]
    items = []
    for it in list(inp) + list(resp["output"]):
        items.append({k: v for k, v in it.items()
                      if k not in NEMO_ITEM_EXTRAS and not (k in ("id", "status") and v is None)})
    items, dropped = responses_drop_unanswered_tail(items)
    body = {"model": resp["model"]}
    if rcp.get("instructions"):
        body["instructions"] = rcp["instructions"]
    body["input"] = items
    tools = rcp.get("tools") or []
    if add_msa_tool:
        assert not tools
        f = msa_tool(MSA_V210)["function"]
        tools = [{"type": "function", "name": f["name"], "description": f["description"],
                  "parameters": f["parameters"]}]
    if tools:
        body["tools"] = tools
    for k in ("temperature", "top_p", "parallel_tool_calls", "tool_choice"):
        if rcp.get(k) is not None:
            body[k] = rcp[k]
    return body, dropped


def responses_drop_unanswered_tail(items):
    """If the final model turn (the last run of reasoning/assistant/function_call items) issued calls that
    were never answered, leave that turn out."""
    answered = {it["call_id"] for it in items if it.get("type") == "function_call_output"}
    open_calls = [it["call_id"] for it in items if it.get("type") == "function_call" and it["call_id"] not in answered]
    if not open_calls:
        return items, 0
    start = len(items)
    while start > 0 and is_model_item(items[start - 1]):
        start -= 1
    tail_calls = {it["call_id"] for it in items[start:] if it.get("type") == "function_call"}
    assert set(open_calls) <= tail_calls, "unanswered call before the final turn"
    return items[:start], 1


def check_responses(body):
    """Responses pairing: the function_call items of a model turn are answered by function_call_output
    items (same call_id, one each) right after that turn, before the next message or model item; no
    output without its call."""
    items = body["input"]
    pending = []
    seen_calls = set()
    for i, it in enumerate(items):
        t = it.get("type", "message")
        if t == "function_call":
            assert it["call_id"] not in seen_calls, ("duplicate call_id", it["call_id"])
            seen_calls.add(it["call_id"])
            pending.append(it["call_id"])
        elif t == "function_call_output":
            assert it["call_id"] in pending, ("output without its call", i)
            pending.remove(it["call_id"])
        else:
            assert t in ("message", "reasoning"), t
            # a new model item may follow open calls only within the same turn (before any output)
            if pending:
                prev = items[i - 1]
                assert is_model_item(it) and prev.get("type") != "function_call_output", ("unanswered call", i)
    assert not pending, pending


# ================================================================ stats
def text_of(c):
    if c is None:
        return 0
    if isinstance(c, str):
        return len(c)
    return sum(len(p.get("text") or "") for p in c)


def chat_stats(body):
    msgs = body["messages"]
    chars = sum(text_of(m.get("content")) for m in msgs)
    chars += sum(len(tc["function"]["arguments"]) for m in msgs for tc in m.get("tool_calls") or [])
    return {"messages": len(msgs), "calls": sum(m["role"] == "assistant" for m in msgs),
            "tool_calls": sum(len(m.get("tool_calls") or []) for m in msgs),
            "tool_results": sum(m["role"] == "tool" for m in msgs), "chars": chars}


def responses_stats(body):
    items = body["input"]
    calls, prev = 0, False
    chars = len(body.get("instructions") or "")
    for it in items:
        m = is_model_item(it)
        if m and not prev:
            calls += 1
        prev = m
        t = it.get("type", "message")
        if t == "message":
            chars += text_of(it.get("content"))
        elif t == "function_call":
            chars += len(it["arguments"])
        elif t == "function_call_output":
            chars += text_of(it["output"])
        elif t == "reasoning":
            chars += sum(len(s.get("text") or "") for s in it.get("summary") or [])
            chars += text_of(it.get("content"))
    return {"messages": len(items), "calls": calls,
            "tool_calls": sum(it.get("type") == "function_call" for it in items),
            "tool_results": sum(it.get("type") == "function_call_output" for it in items), "chars": chars}


# ================================================================ selection
MSA_DS = "output/{set}/{inst}/{inst}.traj.json"


def ds(set_, inst, src=MSA_PR816):
    return lambda: msa_traj(src, MSA_DS.format(set=set_, inst=inst))


NG_MSA2 = "responses_api_agents/mini_swe_agent_2/data/example_rollouts.jsonl"
NG_TERM = "responses_api_agents/anyterminal_agent/data/example_rollouts_hermes.jsonl"
NG_LEGAL = "resources_servers/legal_agent_bench/data/example_rollouts.jsonl"

RUNS = [
    # (name, format, builder)
    ("swesmith-pandas-dev__pandas.95280573.pr_53856", "chat",
     lambda: swesmith_fc("pandas-dev__pandas.95280573.pr_53856")),
    ("sweagent-gpt4-pydicom__pydicom-1458", "chat",
     lambda: sweagent_v0("gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1",
                         "pydicom__pydicom-1458")),
    ("nebius-swe-agent-ReviewNB__treon-25_38", "chat", lambda: nebius(4, "ReviewNB__treon-25_38")),
    ("nebius-swe-agent-brightway-lca__brightway2-analyzer-19_23", "chat",
     lambda: nebius(3, "brightway-lca__brightway2-analyzer-19_23")),
    ("msa-deepseek-astropy__astropy-12907", "chat",
     lambda: msa_traj(MSA_PR854, "eval/example_trajectories/astropy__astropy-12907.traj.json")),
    ("msa-deepseek-astropy__astropy-14365", "chat", ds("deepseek_chat_test_1-100", "astropy__astropy-14365")),
    ("msa-deepseek-django__django-11039", "chat", ds("deepseek_chat_test_1-100", "django__django-11039")),
    ("msa-deepseek-django__django-11099", "chat", ds("deepseek_chat_test_1-100", "django__django-11099")),
    ("msa-deepseek-django__django-11797", "chat", ds("deepseek_chat_test_1-100", "django__django-11797")),
    ("msa-deepseek-sqlfluff__sqlfluff-2419", "chat", ds("deepseek_chat_dev", "sqlfluff__sqlfluff-2419")),
    ("msa-deepseek-pydicom__pydicom-1256", "chat", ds("deepseek_chat_dev", "pydicom__pydicom-1256")),
    ("msa-deepseek-pylint-dev__astroid-1978", "chat", ds("deepseek_chat_dev", "pylint-dev__astroid-1978")),
    ("msa-deepseek-marshmallow-code__marshmallow-1359", "chat",
     ds("deepseek_chat_dev", "marshmallow-code__marshmallow-1359")),
    ("msa-deepseek-pyvista__pyvista-4315-rerun", "chat", ds("deepseek_chat_dev_rerun", "pyvista__pyvista-4315")),
    ("msa-deepseek-pvlib__pvlib-python-1154-noparallel", "chat",
     ds("deepseek_lite_dev_noparallel", "pvlib__pvlib-python-1154")),
    ("nemo-gym-mini-swe-agent-2-django__django-10973", "responses",
     lambda: nemo_rollout(NG_MSA2, 2, "django__django-10973", add_msa_tool=True)),
    ("nemo-gym-mini-swe-agent-2-sympy__sympy-20916", "responses",
     lambda: nemo_rollout(NG_MSA2, 4, "sympy__sympy-20916", add_msa_tool=True)),
    ("nemo-gym-hermes-terminal-bench-log-summary-date-ranges", "responses",
     lambda: nemo_rollout(NG_TERM, 2, "terminal_bench::log-summary-date-ranges")),
    ("nemo-gym-hermes-terminal-bench-portfolio-optimization", "responses",
     lambda: nemo_rollout(NG_TERM, 3, "terminal_bench::portfolio-optimization")),
    ("nemo-gym-hermes-terminal-bench-configure-git-webserver", "responses",
     lambda: nemo_rollout(NG_TERM, 4, "terminal_bench::configure-git-webserver")),
    ("nemo-gym-legal-agent-bench-compare-trust-documents", "responses",
     lambda: nemo_rollout(NG_LEGAL, 0, "legal_agent_bench::trusts-estates-private-client__compare-trust-documents-against-client-instructions")),
    ("nemo-gym-legal-agent-bench-categorize-document-production", "responses",
     lambda: nemo_rollout(NG_LEGAL, 2, "legal_agent_bench::litigation-dispute-resolution__categorize-document-production-set-by-relevance-and-privilege")),
    ("nemo-gym-finance-agent-v2-row4", "responses",
     lambda: nemo_rollout("resources_servers/finance_agent_v2/data/example_rollouts.jsonl", 4, None)),
    ("nemo-gym-finance-sec-search-row4", "responses",
     lambda: nemo_rollout("resources_servers/finance_sec_search/data/example_rollouts.jsonl", 4, None)),
    ("nemo-gym-math-with-code-row4", "responses",
     lambda: nemo_rollout("resources_servers/math_with_code/data/example_rollouts.jsonl", 4, None)),
    ("nemo-gym-newton-bench-row2", "responses",
     lambda: nemo_rollout("resources_servers/newton_bench/data/example_rollouts.jsonl", 2, None)),
    ("nemo-gym-ns-tools-row4", "responses",
     lambda: nemo_rollout("resources_servers/ns_tools/data/example_rollouts.jsonl", 4, None)),
    ("nemo-gym-openclaw-row4", "responses",
     lambda: nemo_rollout("responses_api_agents/openclaw_agent/data/example_rollout.jsonl", 4, None)),
]


ADP_HEAD = ("zhu-yiqi+agent-data-protocol/repo", "df5b5adc3b61adbe0a0cc250d56a781cbffc867e")  # fork HEAD (README licence)

# LICENSES/<file>: copied unchanged from the source repository at the pinned commit
LICENSE_FILES = [
    ("SWE-smith.MIT.txt", SWE_SMITH, "LICENSE"),
    ("SWE-agent.MIT.txt", SWE_AGENT, "LICENSE"),
    ("mini-swe-agent.MIT.md", MSA_PR816, "LICENSE.md"),  # same blob at PR #854's head and at v2.1.0
    ("NeMo-Gym.Apache-2.0.txt", NEMO_GYM, "LICENSE"),
    ("Harvey-LAB.MIT.txt", NEMO_GYM, "resources_servers/legal_agent_bench/vendor/harvey_labs/LICENSE"),
]

CC_BY_NOTICE = """nebius/SWE-agent-trajectories (Nebius), licensed under the Creative Commons Attribution 4.0
International licence (CC BY 4.0): https://creativecommons.org/licenses/by/4.0/
(legal code: https://creativecommons.org/licenses/by/4.0/legalcode).

Badertdinov et al., "Scaling data collection for training software engineering agents", Nebius blog,
2024. https://huggingface.co/datasets/nebius/SWE-agent-trajectories

The files data/heldout/nebius-swe-agent-*.chat.json.gz are adapted from two rows of that dataset as
sampled in the Agent Data Protocol repository (datasets/nebius_SWE-agent-trajectories/sample_raw.json):
rows re-shaped into OpenAI Chat Completions request bodies; message texts unchanged. Provided as is,
without warranties. The Agent Data Protocol repository carries no licence file for this sample;
agent-data-protocol.README-license.md holds its README's licence section.
"""


def write_licenses(out):
    d = os.path.join(out, "LICENSES")
    os.makedirs(d, exist_ok=True)
    for fname, src, path in LICENSE_FILES:
        with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
            f.write(git_show(src, path))
    readme = git_show(ADP_HEAD, "README.md")
    start = readme.index("## License")
    end = readme.find("\n## ", start + 1)
    with open(os.path.join(d, "agent-data-protocol.README-license.md"), "w", encoding="utf-8") as f:
        f.write(readme[start:end if end != -1 else None].rstrip("\n") + "\n")
    with open(os.path.join(d, "nebius-SWE-agent-trajectories.CC-BY-4.0.txt"), "w", encoding="utf-8") as f:
        f.write(CC_BY_NOTICE)


def write_gz(path, data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as g:
        g.write(data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stats", action="store_true", help="print one JSON line of counts per file")
    ap.add_argument("--only", help="build only runs whose name contains this")
    a = ap.parse_args()
    if not MIRRORS:
        sys.exit("set MIRRORS to the folder holding the bare git clones")
    os.makedirs(a.out, exist_ok=True)
    write_licenses(a.out)
    for name, fmt, build in RUNS:
        if a.only and a.only not in name:
            continue
        body, dropped = build()
        if fmt == "chat":
            check_chat(body)
            s = chat_stats(body)
        else:
            check_responses(body)
            s = responses_stats(body)
        data = (json.dumps(body, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
        path = os.path.join(a.out, f"{name}.{fmt}.json.gz")
        write_gz(path, data)
        if a.stats:
            s.update(file=os.path.basename(path), format=fmt, model=body["model"], bytes=len(data),
                     gz_bytes=os.path.getsize(path), tools=len(body.get("tools") or []),
                     dropped_final_turns=dropped)
            print(json.dumps(s), flush=True)


if __name__ == "__main__":
    sys.exit(main())
