"""The ``muep-http`` agent against a small local server of MuEP's released client protocol (written here from the
protocol's description in docs/muep-eval.md, not from the agent's code): the request fields, the history the client
builds, the MD5 checks both ways, retries, SKIP, and the closing ``done`` request after a win; and the other way
round, an agent of ours served to requests written as the released client writes them."""

from __future__ import annotations

import ast
import hashlib
import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tasks.muep.eval.agents import AgentBudgetExhausted, AgentContext, build_agent
from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.agents.muep_http import ProtocolError, action_of, parse_request, request_body, serve
from tasks.muep.eval.records import EpisodeSpec, Observation
from tasks.params import EvalParams

INTRO = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see "
         "a desk 1, and a drawer 1.\n\nYour task is to: put some pen on desk.")
SPEC = EpisodeSpec("e1", "alfworld_seen", "FloorPlan301", "pick_and_place_simple", "put some pen on desk.", "Pen",
                   "Desk", "muep-released")


class ProtocolServer:
    """Answers like a model server of the released client: checks the request's MD5, replies ``["<action>"]`` with
    the reply's MD5. ``answers`` are used in order; an answer ``("bad-md5", action)`` gets a wrong MD5 header."""

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []

    @contextmanager
    def running(self) -> Iterator[str]:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.headers["MD5"] == hashlib.md5(body).hexdigest()  # noqa: S324
                owner.requests.append(body.decode("utf-8"))
                answer = owner.answers.pop(0) if owner.answers else "look"
                bad = isinstance(answer, tuple)
                out = answer[1].encode() if bad and answer[1] == "SKIP" else json.dumps(
                    [answer[1] if bad else answer]).encode()
                if answer == "SKIP":
                    out = b"SKIP"
                self.send_response(200)
                self.send_header("MD5", "0" * 32 if bad else hashlib.md5(out).hexdigest())  # noqa: S324
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


def fields(body: str) -> dict[str, str]:
    """The six fields, split at the markers the released client writes."""
    out, rest = {}, body
    for name, nxt in zip(("OBSERVATION", "HISTORY", "INFORMATION", "TYPE", "DONE", "IMAGE"),
                         ("[#HISTORY]", "[#INFORMATION]", "[#TYPE]", "[#DONE]", "[#IMAGE]", None), strict=True):
        assert rest.startswith(f"[#{name}]")
        rest = rest[len(name) + 3:]
        cut = rest.index(nxt) if nxt else len(rest)
        out[name], rest = rest[:cut], rest[cut:]
    return out


def agent_for(url: str, **extra):
    return build_agent("muep-http", EvalParams(muep_http={"url": url, "max_retries": 1} | extra), AgentContext())


def obs(step: int, text: str, history=()) -> Observation:
    return Observation(instruction=SPEC.instruction, task_type=SPEC.task_type, step=step, text=text, history=history,
                       admissible=("go to desk 1", "go to drawer 1", "look"), grammar="muep-released")


def test_requests_carry_the_clients_fields_and_history():
    server = ProtocolServer(["go   to desk 1", "take pen 1 from desk 1"])
    with server.running() as url:
        agent = agent_for(url)
        agent.reset(SPEC)
        assert agent.act(obs(1, INTRO)) == "go to desk 1"  # whitespace collapsed, as the client does
        assert agent.act(obs(2, "You arrive at loc 2. On the desk 1, you see a pen 1.")) == "take pen 1 from desk 1"
    first, second = (fields(r) for r in server.requests)
    assert first["OBSERVATION"] == INTRO
    assert first["HISTORY"] == ("[STATE] You are in the middle of a room. Looking quickly around you, you see a "
                                "desk 1, and a drawer 1. Your task is to: put some pen on desk. [action] ")
    assert first["TYPE"] == "pick_and_place_simple-Pen-None-Desk/e1" and second["TYPE"] == ""
    assert ast.literal_eval(first["DONE"]) == (False, "0.0") and ast.literal_eval(second["DONE"]) == (False, "0")
    info = ast.literal_eval(first["INFORMATION"])
    assert info["won"] is False and info["admissible_commands"] == ["go to desk 1", "go to drawer 1", "look"]
    frame = json.loads(first["IMAGE"])
    assert len(frame) == len(frame[0]) == 300 and frame[0][0] == [0, 0, 0]
    assert second["HISTORY"] == first["HISTORY"] + ("go to desk 1 [STATE] You arrive at loc 2. On the desk 1, you see "
                                                    "a pen 1. [action] ")
    assert agent.calls == 2


def test_a_reply_with_a_wrong_md5_is_retried_then_an_error():
    server = ProtocolServer([("bad-md5", "look"), "inventory"])
    with server.running() as url:
        agent = agent_for(url)
        agent.reset(SPEC)
        assert agent.act(obs(1, INTRO)) == "inventory" and len(server.requests) == 2
        server.answers = [("bad-md5", "look"), ("bad-md5", "look")]
        with pytest.raises(ProtocolError, match="no valid reply after 2 requests"):
            agent.act(obs(2, "Nothing happens."))


def test_skip_ends_the_episode_and_a_win_sends_the_closing_request():
    server = ProtocolServer(["SKIP"])
    with server.running() as url:
        agent = agent_for(url)
        agent.reset(SPEC)
        with pytest.raises(AgentBudgetExhausted, match="SKIP"):
            agent.act(obs(1, INTRO))
        server.answers = ["go to desk 1", "anything"]
        agent.reset(SPEC)
        agent.act(obs(1, INTRO))
        agent.finish(obs(2, "You won!"), won=True)
    closing = fields(server.requests[-1])
    assert ast.literal_eval(closing["DONE"]) == (True, "1") and ast.literal_eval(closing["INFORMATION"])["won"]
    assert closing["HISTORY"].endswith("go to desk 1 [STATE] You won! [action] ")


def test_protocol_helpers_round_trip_and_reject_bad_replies():
    body = request_body("o", "h", {"won": False}, "t", False, "0.0", "[]")
    assert body == "[#OBSERVATION]o[#HISTORY]h[#INFORMATION]{'won': False}[#TYPE]t[#DONE](False, '0.0')[#IMAGE][]"
    assert parse_request(body) == fields(body)
    reply = json.dumps(["put pen 1 in/on desk 1"]).encode()
    assert action_of(reply, hashlib.md5(reply).hexdigest()) == "put pen 1 in/on desk 1"  # noqa: S324
    with pytest.raises(ProtocolError, match="MD5"):
        action_of(reply, None)
    with pytest.raises(ProtocolError, match="should start with"):
        parse_request("[#HISTORY]x")
    with pytest.raises(ValueError, match="http"):
        EvalParams(muep_http={"url": "127.0.0.1:8080"})


class Echo(Agent):
    """Answers with the first admissible command it has not said yet, and remembers what it saw."""

    name = "echo"

    def __init__(self):
        super().__init__(EvalParams(), AgentContext())
        self.seen, self.resets = [], []

    @classmethod
    def describe(cls, params) -> AgentInfo:
        return AgentInfo(cls.name, cls.name, "echo")

    def reset(self, episode):
        super().reset(episode)
        self.resets.append(episode)

    def act(self, observation):
        self.seen.append(observation)
        said = {t.action for t in observation.history}
        return next(c for c in observation.admissible if c not in said)


def test_an_agent_of_ours_answers_the_released_clients_requests():
    echo = Echo()
    server = serve(echo, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        # a request as the released client writes it, by hand
        info = {"won": False, "admissible_commands": ["look", "go to desk 1"], "extra.gamefile": "x/y/game.tw-pddl"}
        body = (f"[#OBSERVATION]{INTRO}[#HISTORY][STATE] a [action] [#INFORMATION]{info!r}"
                "[#TYPE]pick_and_place_simple-Pen-None-Desk-301/trial_T1[#DONE](False, '0.0')[#IMAGE][[[0, 0, 0]]]")
        request = urllib.request.Request(url, data=body.encode(), method="POST",
                                         headers={"MD5": hashlib.md5(body.encode()).hexdigest()})  # noqa: S324
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310
            raw = reply.read()
            assert reply.headers["MD5"] == hashlib.md5(raw).hexdigest()  # noqa: S324
        assert raw.decode()[2:-2] == "go to desk 1"  # what the client keeps of the reply
        assert echo.resets[-1].task_type == "pick_and_place_simple"
        assert echo.resets[-1].instruction == "put some pen on desk."
        # our client against our server: the second step's history holds the first answer
        client = agent_for(url)
        client.reset(SPEC)
        assert client.act(obs(1, INTRO)) == "go to desk 1"
        assert client.act(obs(2, "You arrive at loc 2. On the desk 1, you see a pen 1.")) == "go to drawer 1"
        assert [t.action for t in echo.seen[-1].history] == ["go to desk 1"]
        bad = urllib.request.Request(url, data=b"[#OBSERVATION]x", method="POST", headers={"MD5": "0"})
        with pytest.raises(urllib.error.HTTPError, match="400"):
            urllib.request.urlopen(bad, timeout=10)  # noqa: S310
    finally:
        server.shutdown()
        server.server_close()
