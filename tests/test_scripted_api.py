"""The scripted Messages API stand-in, driven by the real anthropic SDK tool runner, and the demo.

Everything here talks to a server on 127.0.0.1 with a dummy key; nothing reaches the real API.
"""

from __future__ import annotations

import io
import itertools
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import helpers_runner as runner
import pytest
from anthropic.lib.tools._beta_builtin_memory_tool import (
    BetaAsyncLocalFilesystemMemoryTool,
    BetaLocalFilesystemMemoryTool,
)

from gitmem.demo.progress_log import (
    SESSIONS,
    WORKER_PROMPT,
    ProgressLogModel,
    SessionTranscript,
    run_demo,
    run_session,
    run_sessions,
)
from gitmem.demo.scripted_api import (
    STAND_IN_MODEL,
    THREADS_BETA,
    Conversation,
    RecordedRequest,
    Script,
    ScriptedAPI,
    ScriptExhaustedError,
    memory_call,
    text,
)

# urllib would otherwise send even loopback requests through a proxy named in the environment.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MEMORY_TOOL_PARAM = {"type": "memory_20250818", "name": "memory"}
PROMPT = "Remember that the build uses ./init.sh."


def three_turn_script() -> Script:
    """View the store, create a file (and view a missing one), then answer."""
    return Script(
        [text("Looking first."), memory_call("view", path="/memories")],
        [
            memory_call("create", path="/memories/notes.md", file_text="build: ./init.sh\n"),
            memory_call("view", path="/memories/missing.md"),
        ],
        [text("Noted.")],
    )


def run_sync(
    api: ScriptedAPI, tool: Any, *, threaded: bool = True, stream: bool = False
) -> anthropic.types.beta.BetaMessage:
    return runner.run_sync(api, tool, PROMPT, threaded=threaded, stream=stream)


def run_async(api: ScriptedAPI, tool: Any, *, threaded: bool = True) -> Any:
    return runner.run_async(api, tool, PROMPT, threaded=threaded)


def tool_use_ids(request: RecordedRequest) -> list[str]:
    assert request.response is not None
    return [b["id"] for b in request.response["content"] if b["type"] == "tool_use"]


def check_threaded_wire(requests: list[RecordedRequest]) -> None:
    """First request creates the thread with the tools; each later one continues from the last
    reply and carries only the results of that reply's tool calls."""
    assert all(r.path == "/v1/messages" and r.status == 200 for r in requests)
    assert all(THREADS_BETA in r.betas for r in requests)
    first = requests[0]
    assert first.thread == {"type": "create"}
    assert first.body is not None and first.body["tools"] == [MEMORY_TOOL_PARAM]
    assert first.messages == [{"role": "user", "content": PROMPT}]
    for previous, request in itertools.pairwise(requests):
        assert previous.response is not None and request.body is not None
        assert request.thread == {
            "type": "continue",
            "previous_message_id": previous.response["id"],
        }
        assert "tools" not in request.body and "system" not in request.body
        [message] = request.messages
        assert message["role"] == "user"
        assert [b["type"] for b in message["content"]] == ["tool_result"] * len(message["content"])
        assert [b["tool_use_id"] for b in message["content"]] == tool_use_ids(previous)


def check_full_history_wire(requests: list[RecordedRequest]) -> None:
    assert all(r.status == 200 and r.thread is None for r in requests)
    assert all(THREADS_BETA not in r.betas for r in requests)
    assert all(r.body is not None and r.body["tools"] == [MEMORY_TOOL_PARAM] for r in requests)
    assert [len(r.messages) for r in requests] == [1, 3, 5]
    for previous, request in itertools.pairwise(requests):
        assert request.messages[: len(previous.messages)] == previous.messages
        assert request.messages[-2]["role"] == "assistant"
        assert [b["tool_use_id"] for b in request.messages[-1]["content"]] == tool_use_ids(previous)


def check_outcome(api: ScriptedAPI, final: Any, memory_dir: Path) -> None:
    assert final.model == STAND_IN_MODEL
    assert [b.text for b in final.content] == ["Noted."]
    assert (memory_dir / "memories" / "notes.md").read_text() == "build: ./init.sh\n"
    assert api.errors == []
    assert len(api.requests) == 3


# --- the tool runner against the stand-in -----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["parse", "stream"])
def test_sync_runner_threaded(tmp_path: Path, stream: bool) -> None:
    with ScriptedAPI(three_turn_script()) as api:
        final = run_sync(api, BetaLocalFilesystemMemoryTool(str(tmp_path)), stream=stream)
    check_outcome(api, final, tmp_path)
    check_threaded_wire(api.requests)
    assert all(r.streamed == stream for r in api.requests)


@pytest.mark.parametrize("stream", [False, True], ids=["parse", "stream"])
def test_sync_runner_full_history(tmp_path: Path, stream: bool) -> None:
    with ScriptedAPI(three_turn_script()) as api:
        final = run_sync(
            api, BetaLocalFilesystemMemoryTool(str(tmp_path)), threaded=False, stream=stream
        )
    check_outcome(api, final, tmp_path)
    check_full_history_wire(api.requests)


def test_async_runner_threaded(tmp_path: Path) -> None:
    with ScriptedAPI(three_turn_script()) as api:
        final = run_async(api, BetaAsyncLocalFilesystemMemoryTool(str(tmp_path)))
    check_outcome(api, final, tmp_path)
    check_threaded_wire(api.requests)


def test_async_runner_full_history(tmp_path: Path) -> None:
    with ScriptedAPI(three_turn_script()) as api:
        final = run_async(api, BetaAsyncLocalFilesystemMemoryTool(str(tmp_path)), threaded=False)
    check_outcome(api, final, tmp_path)
    check_full_history_wire(api.requests)


def test_model_sees_the_same_conversation_in_both_modes(tmp_path: Path) -> None:
    seen: dict[bool, list[Conversation]] = {}
    held: list[dict[str, Any]] = []
    for threaded in (True, False):
        script = three_turn_script()
        with ScriptedAPI(script) as api:
            run_sync(
                api, BetaLocalFilesystemMemoryTool(str(tmp_path / str(threaded))), threaded=threaded
            )
            if threaded:
                held = api.thread_history(str(script.conversations[0].thread_id))
        seen[threaded] = script.conversations
    # The server's copy of the thread is the last conversation plus the final reply.
    assert held[:-1] == list(seen[True][-1].messages)
    assert held[-1]["content"][0]["text"] == "Noted."
    threaded_ids = [c.thread_id for c in seen[True]]
    assert threaded_ids[0] is not None and set(threaded_ids) == {threaded_ids[0]}
    assert {c.thread_id for c in seen[False]} == {None}
    for with_thread, without in zip(seen[True], seen[False], strict=True):
        assert with_thread.messages == without.messages
        assert with_thread.tools == without.tools == (MEMORY_TOOL_PARAM,)


def test_tool_errors_come_back_as_is_error_results(tmp_path: Path) -> None:
    script = Script(
        [
            memory_call("view", path="/memories/missing.md"),
            memory_call("str_replace", path="/memories/missing.md", old_str="a", new_str="b"),
            memory_call("view", path="/etc/passwd"),
            memory_call("view", path="/memories"),
        ],
        [text("Done.")],
    )
    with ScriptedAPI(script) as api:
        run_sync(api, BetaLocalFilesystemMemoryTool(str(tmp_path)))
    results = api.requests[1].messages[-1]["content"]
    assert [r.get("is_error", False) for r in results] == [True, True, True, False]
    assert results[0]["content"] == (
        "The path /memories/missing.md does not exist. Please provide a valid path."
    )
    exchanges = script.conversations[1].latest_exchanges()
    assert [(e.command, e.is_error) for e in exchanges] == [
        ("view", True),
        ("str_replace", True),
        ("view", True),
        ("view", False),
    ]
    assert exchanges[1].result is not None and "does not exist" in exchanges[1].result


def test_a_lost_thread_is_replayed_in_full(tmp_path: Path) -> None:
    holder: list[ScriptedAPI] = []

    def lose_the_thread(conversation: Conversation) -> list[dict[str, Any]]:
        holder[0].drop_threads()
        return [memory_call("view", path="/memories")]

    script = Script([memory_call("view", path="/memories")], lose_the_thread, [text("Done.")])
    with ScriptedAPI(script) as api:
        holder.append(api)
        final = run_sync(api, BetaLocalFilesystemMemoryTool(str(tmp_path)))
    assert [b.type == "text" and b.text for b in final.content] == ["Done."]
    statuses = [(r.status, (r.thread or {}).get("type"), len(r.messages)) for r in api.requests]
    assert statuses == [
        (200, "create", 1),
        (200, "continue", 1),
        (404, "continue", 1),
        (200, "create", 5),
    ]
    assert api.requests[2].response is not None
    assert api.requests[2].response["error"]["details"] == {"error_code": "thread_not_found"}


def test_the_server_refuses_what_the_api_refuses() -> None:
    script = Script([memory_call("view", path="/memories")], [text("ok")])
    with ScriptedAPI(script) as api, api.client() as client:
        create = client.beta.messages.create

        def turn(thread: Any, messages: Any = "hi", **extra: Any) -> Any:
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            return create(
                model=STAND_IN_MODEL,
                max_tokens=10,
                messages=messages,
                thread=thread,
                betas=[THREADS_BETA],
                **extra,
            )

        first = turn({"type": "create"})
        with pytest.raises(anthropic.NotFoundError, match="msg_unknown"):
            turn({"type": "continue", "previous_message_id": "msg_unknown"})
        with pytest.raises(anthropic.BadRequestError, match="without `tool_result`"):
            turn({"type": "continue", "previous_message_id": first.id})
        [call] = first.content
        assert call.type == "tool_use"
        result = [{"type": "tool_result", "tool_use_id": call.id, "content": "empty"}]
        second = turn(
            {"type": "continue", "previous_message_id": first.id},
            [{"role": "user", "content": result}],
        )
        assert second.content[0].type == "text"
        with pytest.raises(anthropic.BadRequestError, match="already been continued"):
            turn({"type": "continue", "previous_message_id": first.id})
        with pytest.raises(anthropic.BadRequestError, match="tools: cannot be sent"):
            turn(
                {"type": "continue", "previous_message_id": second.id},
                tools=[MEMORY_TOOL_PARAM],
            )
        with pytest.raises(anthropic.BadRequestError, match="anthropic-beta"):
            create(
                model=STAND_IN_MODEL,
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
                thread={"type": "create"},
            )
        request = urllib.request.Request(f"{api.base_url}/v1/complete", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as raised:
            DIRECT.open(request, timeout=5)
        raised.value.close()
    assert raised.value.code == 404
    assert [r.status for r in api.requests] == [200, 404, 400, 200, 400, 400, 400, 404]
    codes = [((r.response or {}).get("error") or {}).get("details") for r in api.requests]
    assert codes[1] == {"error_code": "thread_not_found"}
    assert codes[4] == {"error_code": "thread_already_continued"}
    assert all("x-api-key" not in r.headers for r in api.requests)


def test_proxy_settings_cannot_divert_the_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://192.0.2.1:9")  # TEST-NET-1: routes nowhere
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with ScriptedAPI(three_turn_script()) as api:
        final = run_sync(api, BetaLocalFilesystemMemoryTool(str(tmp_path)))
    check_outcome(api, final, tmp_path)


def test_a_failing_model_is_a_500_and_is_kept(tmp_path: Path) -> None:
    api = ScriptedAPI(Script([memory_call("view", path="/memories")]))
    with api, pytest.raises(anthropic.InternalServerError, match="ScriptExhaustedError"):
        run_sync(api, BetaLocalFilesystemMemoryTool(str(tmp_path)))
    [error] = api.errors
    assert isinstance(error, ScriptExhaustedError)


def test_it_listens_on_loopback_only_and_stops() -> None:
    api = ScriptedAPI(Script())
    with api:
        assert api.base_url.startswith("http://127.0.0.1:")
        url = api.base_url
    with pytest.raises(RuntimeError):
        api.base_url  # noqa: B018
    with pytest.raises(urllib.error.URLError):
        DIRECT.open(f"{url}/v1/messages", data=b"{}", timeout=2)
    api.stop()


# --- the demo ---------------------------------------------------------------------------------


def local_factory(base: Path, labels: list[str]) -> Any:
    def factory(label: str) -> BetaLocalFilesystemMemoryTool:
        labels.append(label)
        return BetaLocalFilesystemMemoryTool(str(base))

    return factory


def check_demo_store(memories: Path) -> None:
    assert sorted(p.relative_to(memories).as_posix() for p in memories.rglob("*")) == [
        "archive",
        "features.md",
        "init.md",
        "progress.md",
    ]
    features = (memories / "features.md").read_text()
    assert "- [x] add a task\n- [x] list tasks\n- [ ] mark a task done\n" in features
    log = (memories / "progress.md").read_text().splitlines()
    assert [line.split(" (")[0] for line in log if line.startswith("- Session")] == [
        "- Session 1",
        "- Session 2",
        "- Session 3",
    ]
    assert log[-1].startswith("- Session 3 (worker): implemented 'list tasks'")
    assert "./init.sh" in (memories / "init.md").read_text()


def check_demo_transcripts(transcripts: list[SessionTranscript]) -> None:
    assert [t.label for t in transcripts] == [label for label, _ in SESSIONS]
    assert all(t.model == STAND_IN_MODEL and t.answer for t in transcripts)
    assert all(not call.is_error for t in transcripts for call in t.calls)
    init, first, second = ([c.command for c in t.calls] for t in transcripts)
    assert init == ["view"] + ["create"] * 4
    assert first == ["view"] * 4 + ["str_replace", "insert", "rename"]
    assert second == ["view"] * 4 + ["str_replace", "insert", "delete"]


def test_run_demo_with_the_local_filesystem_tool(tmp_path: Path) -> None:
    out = io.StringIO()
    labels: list[str] = []
    transcripts = run_demo(local_factory(tmp_path, labels), out=out)
    assert labels == ["initializer", "worker-1", "worker-2"]
    check_demo_transcripts(transcripts)
    check_demo_store(tmp_path / "memories")
    printed = out.getvalue()
    assert "scripted stand-in" in printed and "not from Claude" in printed
    for label in labels:
        assert f"== session {label} ==" in printed
    assert "> memory rename /memories/scratch.md -> /memories/archive/scratch.md" in printed
    assert "> memory delete /memories/archive/scratch.md" in printed


@pytest.mark.parametrize("threaded", [True, False], ids=["threads", "full-history"])
def test_demo_sessions_on_the_wire(tmp_path: Path, threaded: bool) -> None:
    with ScriptedAPI(ProgressLogModel()) as api, api.client() as client:
        transcripts = run_sessions(
            client,
            local_factory(tmp_path, []),
            model=STAND_IN_MODEL,
            out=io.StringIO(),
            threaded=threaded,
        )
    check_demo_transcripts(transcripts)
    check_demo_store(tmp_path / "memories")
    creates = [r for r in api.requests if r.thread == {"type": "create"}]
    assert len(creates) == (3 if threaded else 0)  # one thread per session
    # The insert went after the log's last non-empty line, which the model read from the view.
    inserts = [c.input for t in transcripts for c in t.calls if c.command == "insert"]
    assert [i["insert_line"] for i in inserts] == [3, 4]


def worker_session(root: Path) -> tuple[SessionTranscript, ScriptedAPI]:
    """One worker session of the demo's model over the reference tool's files under ``root``;
    the stand-in (stopped) is returned with its recorded requests."""
    with ScriptedAPI(ProgressLogModel()) as api, api.client() as client:
        transcript = run_session(
            client,
            BetaLocalFilesystemMemoryTool(str(root)),
            "worker",
            WORKER_PROMPT,
            model=STAND_IN_MODEL,
            out=io.StringIO(),
        )
    return transcript, api


def test_the_demo_model_reads_the_store_it_finds(tmp_path: Path) -> None:
    memories = tmp_path / "memories"
    memories.mkdir()
    log = "# Progress log\n\n" + "".join(f"- Session {n} (worker): x\n" for n in range(1, 6))
    (memories / "progress.md").write_text(log + "\n\n")
    (memories / "features.md").write_text("- [x] a\n- [x] b\n- [ ] c\n- [ ] d\n")
    (memories / "init.md").write_text("run ./init.sh\n")
    transcript, _ = worker_session(tmp_path)
    assert [c.command for c in transcript.calls] == ["view"] * 4 + ["str_replace", "insert"]
    assert (memories / "features.md").read_text() == "- [x] a\n- [x] b\n- [x] c\n- [ ] d\n"
    lines = (memories / "progress.md").read_text().splitlines()
    assert lines[7].startswith("- Session 6 (worker): implemented 'c'")
    assert "'c'" in transcript.answer


def test_the_demo_model_stops_on_a_tool_error(tmp_path: Path) -> None:
    memories = tmp_path / "memories"
    memories.mkdir()
    (memories / "progress.md").write_text("# Progress log\n")
    transcript, api = worker_session(tmp_path)
    assert [(c.command, c.is_error) for c in transcript.calls] == [
        ("view", False),
        ("view", False),
        ("view", True),
        ("view", True),
    ]
    assert transcript.answer.startswith("Stopping: `view` failed: The path /memories/features.md")
    last_reply = api.requests[-1].response
    assert last_reply is not None and last_reply["stop_reason"] == "end_turn"


def _use(id_: str, name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": {}}


def _result_block(id_: str, content: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id_, "content": content}


def test_context_editing_clears_old_tool_results_but_never_excluded_tools() -> None:
    from gitmem.demo.scripted_api import CLEARED_TOOL_RESULT, apply_context_management

    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, name in enumerate(["read", "memory", "read", "memory", "read"]):
        history.append({"role": "assistant", "content": [_use(f"t{i}", name)]})
        history.append({"role": "user", "content": [_result_block(f"t{i}", f"{name} {i}" * 50)]})
    config = {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "tool_uses", "value": 3},
                "keep": {"type": "tool_uses", "value": 1},
                "exclude_tools": ["memory"],
            }
        ]
    }
    edits = apply_context_management(history, config)
    results = [m["content"][0]["content"] for m in edits.messages[2::2]]
    cleared = [{"type": "text", "text": CLEARED_TOOL_RESULT}]
    assert results[0] == cleared and results[2] == cleared  # the two older reads
    assert results[1] == "memory 1" * 50 and results[3] == "memory 3" * 50
    assert results[4] == "read 4" * 50  # the newest read is kept
    assert [e["cleared_tool_uses"] for e in edits.applied] == [2]
    assert history[2]["content"][0]["content"] == "read 0" * 50


def test_compaction_summarises_and_later_turns_start_from_the_summary() -> None:
    from gitmem.demo.scripted_api import apply_context_management

    history: list[dict[str, Any]] = [{"role": "user", "content": "the task " + "x" * 400}]
    config = {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50}}]
    }
    edits = apply_context_management(history, config)
    assert edits.summary is not None and "the task" in edits.summary
    later: list[dict[str, Any]] = [
        *history,
        {
            "role": "assistant",
            "content": [{"type": "compaction", "content": edits.summary}, _use("a", "m")],
        },
        {"role": "user", "content": [_result_block("a", "ok")]},
    ]
    seen = apply_context_management(later, None).messages
    assert seen[0] == {"role": "user", "content": [{"type": "text", "text": edits.summary}]}
    assert seen[1]["content"] == [_use("a", "m")]
    assert len(seen) == 3
