"""``muep-http``: a model served for MuEP's released test client, asked over that client's HTTP protocol.

The protocol, as ``testing_environment/network_textworld_client.py`` of github.com/kanxueli/MuEP speaks it
(line numbers of that file; docs/muep-eval.md quotes them):

* one ``POST`` to the server's URL per action (``send_command``, l. 39-55); the body is plain text, UTF-8,
  ``[#OBSERVATION]<obs>[#HISTORY]<history>[#INFORMATION]<infos>[#TYPE]<task type>[#DONE]<(done, 'score')>
  [#IMAGE]<frame>`` (one line, no spaces between the fields; ``get_next_action``, l. 58), with a header ``MD5``: the
  hex MD5 of the body. The reply's body is the action wrapped in two characters each side (``["go to desk 1"]``: the
  client keeps ``reply[2:-2]`` and collapses whitespace, l. 70-72) with the MD5 of the reply body in its ``MD5``
  header; a reply whose MD5 does not match is a failed request (l. 48-53). "SKIP" as the first reply skips the game
  (l. 190).
* ``<history>`` grows as the client's ``construt_prompt`` builds it (l. 95-102): ``[STATE] <scene> <task> [action] ``
  first (the intro's second and third paragraphs), then ``<action> [STATE] <feedback> [action] `` per step.
* ``<obs>`` is the game's last text (the whole intro at the start); ``<infos>`` the Python ``repr`` of the game's info
  dict (``won``, ``admissible_commands``, ``extra.gamefile``); ``<task type>`` the game's folder
  ``<task dir>/<trial>`` at the first request and empty after (l. 181-187, 217); ``<(done, 'score')>`` the ``repr``
  of the tuple ``(done, str(score))`` (l. 58), ``'0.0'`` before the first step (l. 57); ``<frame>`` a 300 x 300 RGB
  frame as a JSON nested list (the text client sends the fixed ``data.npy``, l. 76-79, 183; the multimodal one the
  simulator's frame, l. 180).
* after the winning step the client sends one more request with ``done`` true and ignores its answer (l. 219-222).

Ours, where the client has nothing to copy: the game folder is ``<task type>-<object>-None-<target>/<episode id>``
(our episodes have no ALFRED folder); the frame of a text agent is black (the released ``data.npy`` is not ours to
ship), a multimodal agent's is the rendered state; the score is 1 when won, else 0. A failed request is retried
``max_retries`` times, then the action is invalid; "SKIP" ends the episode (``call_budget``).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import urllib.error
import urllib.request

from core.errors import PipelineError
from tasks.muep.eval.agents.base import Agent, AgentBudgetExhausted, AgentInfo
from tasks.muep.eval.records import EpisodeSpec, Observation

FIELDS = ("OBSERVATION", "HISTORY", "INFORMATION", "TYPE", "DONE", "IMAGE")
FRAME_SIZE = 300


class ProtocolError(Exception):
    """A reply that breaks the protocol (a wrong MD5, a body too short to hold an action)."""


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - the protocol's integrity check, not security


def request_body(observation: str, history: str, information: dict, task_type: str, done: bool, score: str,
                 frame: str) -> str:
    """One request of the protocol (``get_next_action``, l. 58)."""
    values = (observation, history, repr(information), task_type, repr((done, score)), frame)
    return "".join(f"[#{name}]{value}" for name, value in zip(FIELDS, values, strict=True))


def parse_request(body: str) -> dict[str, str]:
    """A request's fields by name (the inverse of :func:`request_body`; a field's text never holds a marker)."""
    out: dict[str, str] = {}
    rest = body
    for i, name in enumerate(FIELDS):
        marker = f"[#{name}]"
        if not rest.startswith(marker):
            raise ProtocolError(f"request field {i + 1} should start with {marker!r}, got {rest[:40]!r}")
        rest = rest[len(marker):]
        end = rest.find(f"[#{FIELDS[i + 1]}]") if i + 1 < len(FIELDS) else len(rest)
        if end < 0:
            raise ProtocolError(f"request has no [#{FIELDS[i + 1]}] field")
        out[name], rest = rest[:end], rest[end:]
    return out


def reply_body(action: str) -> bytes:
    """What a server answers: the action wrapped as a one-element JSON list (the client keeps ``[2:-2]``)."""
    return json.dumps([action], ensure_ascii=False).encode("utf-8")


def action_of(reply: bytes, checksum: str | None) -> str:
    """The action in a reply, checked against its ``MD5`` header (l. 48-53, 70-72)."""
    if checksum != md5(reply):
        raise ProtocolError(f"reply MD5 header {checksum!r} does not match its body ({md5(reply)})")
    text = reply.decode("utf-8")
    if text == "SKIP":
        return text
    if len(text) < 4:
        raise ProtocolError(f"reply {text!r} is too short to hold an action between two characters each side")
    return " ".join(text[2:-2].split())


def intro_history(intro: str) -> str:
    """The first history (``construt_prompt`` with a scene, l. 96-97): the intro's scene and task paragraphs."""
    parts = intro.split("\n\n")
    if len(parts) < 3:
        raise ProtocolError(f"the game's intro has {len(parts)} paragraphs, the client reads the 2nd and 3rd")
    return "[STATE] " + parts[1].strip() + " " + parts[2].strip() + " [action] "


def frame_json(png: bytes | None) -> str:
    """The frame as the client sends it: a JSON nested list, rows of [r, g, b]."""
    if png is None:
        row = "[" + ", ".join(["[0, 0, 0]"] * FRAME_SIZE) + "]"
        return "[" + ", ".join([row] * FRAME_SIZE) + "]"
    import numpy as np
    from PIL import Image

    return json.dumps(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).tolist())


class MuEPHTTPAgent(Agent):
    name = "muep-http"

    @classmethod
    def describe(cls, params) -> AgentInfo:
        p = params.muep_http
        return AgentInfo(name=cls.name, label=f"muep-http:{p.model or p.url}", model=p.model or p.url,
                         multimodal=p.multimodal)

    @classmethod
    def preflight(cls, params) -> None:
        if params.muep_http.url is None:
            raise PipelineError("muep.eval.muep_http.url is not set: the model server's http:// URL.",
                                hint="Start the server of MuEP's client protocol and set its URL.")

    def __init__(self, params, context):
        super().__init__(params, context)
        self.multimodal = params.muep_http.multimodal
        self.settings = params.muep_http

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self.history = ""
        self.last_action: str | None = None
        self.folder = f"{episode.task_type}-{episode.object_type}-None-{episode.target_type}/{episode.episode_id}"

    def _post(self, body: str) -> str:
        s = self.settings
        data = body.encode("utf-8")
        request = urllib.request.Request(s.url, data=data, method="POST", headers={"MD5": md5(data)})
        problem: Exception | None = None
        for attempt in range(s.max_retries + 1):
            if attempt:
                time.sleep(min(2.0, 0.1 * 2**attempt))
            try:
                with urllib.request.urlopen(request, timeout=s.timeout_s) as response:  # noqa: S310 - http(s) only
                    return action_of(response.read(), response.headers.get("MD5"))
            except (urllib.error.URLError, OSError, ProtocolError) as exc:
                problem = exc
        raise ProtocolError(f"{s.url}: no valid reply after {s.max_retries + 1} requests: {problem}")

    def _information(self, observation: Observation, won: bool) -> dict:
        return {"won": won, "admissible_commands": list(observation.admissible), "extra.gamefile": self.folder}

    def act(self, observation: Observation) -> str:
        if self.calls >= self.settings.max_calls_per_episode:
            raise AgentBudgetExhausted(f"{self.calls} calls made, max_calls_per_episode is "
                                       f"{self.settings.max_calls_per_episode}")
        first = self.last_action is None
        if first:
            self.history = intro_history(observation.text)
        else:
            self.history += f"{self.last_action} [STATE] {observation.text.strip()} [action] "
        image = observation.image if self.multimodal else None
        body = request_body(observation.text, self.history, self._information(observation, False),
                            self.folder if first else "", False, "0.0" if first else "0", frame_json(image))
        self.calls += 1
        answer = self._post(body)
        self.last_raw = answer
        if answer == "SKIP" and first:
            raise AgentBudgetExhausted("the server answered SKIP: the released client skips this game")
        self.last_action = answer
        return answer

    def finish(self, observation: Observation, won: bool) -> None:
        """After a win the client tells the server (``done`` true) and ignores the answer (l. 219-222)."""
        if not won or self.last_action is None:
            return
        self.history += f"{self.last_action} [STATE] {observation.text.strip()} [action] "
        body = request_body(observation.text, self.history, self._information(observation, True), "", True, "1",
                            frame_json(observation.image if self.multimodal else None))
        self._post(body)


# ----------------------------------------------------------------------------------------------------------------
# The other way round: an agent of ours answering MuEP's released client


class ProtocolAnswerer:
    """Answers the released client's requests with one of our agents: a request whose ``[#TYPE]`` is not empty
    starts an episode (the client sends the game folder only then, l. 187 and 217), a request with ``done`` true
    ends it (the answer is ignored by the client). Our agent sees what the client sends: the observation, the
    admissible commands of ``[#INFORMATION]``, the task from the intro, its own earlier (observation, action) pairs."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.history: list[tuple[str, str]] = []
        self.current: tuple[str, str] | None = None  # (observation, action) of the last answer
        self.instruction = ""
        self.task_type = ""

    def answer(self, body: str) -> str:
        import ast

        from tasks.muep.eval.records import Turn
        from tasks.muep.vocab import canonical_task_type

        fields = parse_request(body)
        done, _ = ast.literal_eval(fields["DONE"])
        info = ast.literal_eval(fields["INFORMATION"]) if fields["INFORMATION"] else {}
        if fields["TYPE"]:
            folder = fields["TYPE"].split("/")[0]
            self.task_type = canonical_task_type(folder.split("-")[0]) or folder.split("-")[0]
            intro = fields["OBSERVATION"].split("\n\n")
            self.instruction = intro[2].removeprefix("Your task is to:").strip() if len(intro) > 2 else ""
            self.history, self.current = [], None
            self.agent.reset(EpisodeSpec(fields["TYPE"], "served", "", self.task_type, self.instruction, "", "",
                                         "muep-released"))
        elif self.current is not None:
            self.history.append(self.current)
        if done:
            return ""
        observation = Observation(instruction=self.instruction, task_type=self.task_type, step=len(self.history) + 1,
                                  text=fields["OBSERVATION"], history=tuple(Turn(o, a) for o, a in self.history),
                                  admissible=tuple(sorted(info.get("admissible_commands", ()))),
                                  grammar="muep-released")
        action = self.agent.act(observation)
        self.current = (fields["OBSERVATION"], action)
        return action


def serve(agent: Agent, host: str = "127.0.0.1", port: int = 8080):
    """An HTTP server of the released protocol answering with ``agent`` (one client at a time, as the client plays
    one game at a time). Returns the server; call ``serve_forever()`` on it."""
    import http.server
    import threading

    answerer, lock = ProtocolAnswerer(agent), threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("MD5") != md5(body):
                self.send_error(400, "MD5 header does not match the body")
                return
            try:
                with lock:
                    out = reply_body(answerer.answer(body.decode("utf-8")))
            except (ProtocolError, ValueError, SyntaxError) as exc:
                self.send_error(400, f"not a request of MuEP's client protocol: {exc}")
                return
            self.send_response(200)
            self.send_header("MD5", md5(out))
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    return http.server.ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> None:
    """``python -m tasks.muep.eval.agents.muep_http --agent hf --port 8080``: serve an agent of ours (built from
    params.yaml's ``muep.eval``) to MuEP's released client."""
    import argparse

    from tasks.muep.eval.agents import AgentContext, build_agent
    from tasks.params import load_params

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--agent", required=True, help="registry name (core.plugins.AGENTS), e.g. hf, openai")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    params = load_params().muep.eval
    server = serve(build_agent(args.agent, params, AgentContext(seed=params.seed)), args.host, args.port)
    print(f"serving {args.agent} to MuEP's client at http://{args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
