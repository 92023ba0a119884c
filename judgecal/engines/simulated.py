"""A SIMULATED judge with known, planted biases, for tests and for checking that calibration
recovers a known correction. Its identity starts with ``simulated:`` and reports label it
simulated; it is never the default of a real study.

Model (per item with human target y, on the judge's scale):
    s0            = y + sum_b bias[b] * f_b(content) + noise
    s(a, more)    = s0 + sensitivity * f_a(content) + probe_noise
    s(a, less)    = s0 - sensitivity * f_a(content) + probe_noise
A one-sided unit moves it by sensitivity / 2 * f_unit(content); a neutral clause, an
ignored attribute or an ignored unit (``ignores``) by probe noise alone (controls and inert
units for screening); a joint probe ("more a and more b") by the sum of the two; an instruction
injected into the content by ``gullibility``. Shown several candidates at once (the order
diagnostic's batched and pairwise prompts), it scores each as above and adds
``position_bias`` to the one shown first, plus probe noise per position. f_length is the standardised log word count, f_hedging the standardised rate of hedge
words; any other attribute gets a fixed pseudo-random feature of the content. So a
length bias b is visible in the ``length:*`` probe deltas, and PRISM can learn to remove it.
Noise is a deterministic function of the request id, so reruns reproduce the same scores.

Human labels never travel with a request: the study hands the simulated judge its truth
through its own config (``with_truth``: item id -> target, "item id/criterion id" -> label),
before it plans the requests: a digest of the truth ends the identity, so the request ids
of relabelled data are new ones and the answers built from the old labels are not reused.

As a SIMULATED verifier (binary scale 0-1) the truth of a criterion is its label where the
truth has one, else a fixed pseudo-random draw that favours the longer response of a pair;
each criterion has a fixed instability e in [0, max_flip] and every template (or sample)
flips the truth with probability e. So template disagreement marks unreliable criteria,
which is what URW is meant to detect.
"""

from __future__ import annotations

import functools
import math
import re
import time
from dataclasses import dataclass, field, replace

import numpy as np

from judgecal.ids import stable_hash_many, stable_unit
from judgecal.engines.base import (
    RUNTIME,
    GENERATE,
    SAMPLING,
    SCORE,
    Engine,
    EngineConfig,
    JudgeOutput,
    JudgePrompt,
    register,
)
from judgecal.errors import InputError, unread_setting
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_OK

_HEDGES = re.compile(r"\b(may|might|could|perhaps|possibly|likely|reportedly|allegedly|apparently|seems?)\b", re.I)


def _unit(key: str) -> float:
    """A fixed pseudo-random number in [-1, 1] for ``key``."""
    return stable_unit(key) * 2 - 1


def _gauss(key: str) -> float:
    u1 = (stable_unit("a" + key) * 0xFFFFFFFF + 1) / (0xFFFFFFFF + 2)
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * stable_unit("b" + key))


def attribute_feature(attribute: str, content: str) -> float:
    words = max(1, len(content.split()))
    if attribute == "length":
        return (math.log(words) - math.log(60)) / 0.4
    if attribute == "hedging":
        return (len(_HEDGES.findall(content)) / words * 100 - 1.0) / 1.0
    return _unit(f"{attribute}\x00{content}")


@register
@dataclass(frozen=True)
class SimulatedEngineConfig(EngineConfig):
    kind = "simulated"
    capabilities = frozenset({SCORE, GENERATE, SAMPLING})
    wants_meta = True
    biases: dict[str, float] = field(default_factory=lambda: {"length": 0.8})
    sensitivity: float = 0.5
    noise: float = 0.3
    probe_noise: float = 0.05
    max_flip: float = 0.45  # verifier: the most unstable criterion flips this often
    name: str = "biased"
    ignores: tuple[str, ...] = ()  # attributes or one-sided units (``role:editor``) it does not react to
    gullibility: float = 0.5  # how far an instruction injected into the content raises its score
    position_bias: float = 0.3  # what being shown first among several candidates adds
    # Seconds each request takes (slept, or spun on the CPU with cpu_bound = true): a slow judge
    # for fault and cluster tests, and each answer's latency_s. Not part of the identity, so it never
    # changes a request id.
    latency_s: float = 0.0
    cpu_bound: bool = False
    truth: dict = field(default_factory=dict, compare=False, repr=False, metadata=RUNTIME)  # set by the study

    @functools.cached_property  # a digest of a study's whole truth: once per config
    def identity(self) -> str:
        spec = ",".join(f"{k}={v:g}" for k, v in sorted(self.biases.items()))
        ignores = f";ignores={'+'.join(self.ignores)}" if self.ignores else ""
        gullible = f";g={self.gullibility:g}" if self.gullibility != 0.5 else ""  # the defaults keep older ids
        first = f";pb={self.position_bias:g}" if self.position_bias != 0.3 else ""
        # its answers are built from the labels: relabelled data must not reuse them (a real judge's
        # are reused), so the labels it holds are part of what it is, and of its request ids
        truth = f";truth={stable_hash_many(f'{k}={v}' for k, v in sorted(self.truth.items()))}" if self.truth else ""
        return (f"simulated:{self.name}[{spec};s={self.sensitivity:g};n={self.noise:g};pn={self.probe_noise:g};"
                f"f={self.max_flip:g}{ignores}{gullible}{first}]{truth}")

    counts_words = True  # the user message's words (show's estimate, ~4 characters a token, read 1.8x more)

    @property
    def requests_per_s(self) -> float:  # sizes blocks to ~part_seconds of work
        return 1.0 / self.latency_s if self.latency_s > 0 else 20_000.0

    def check_fields(self, where: str = "[engine]") -> None:
        if not (isinstance(self.latency_s, (int, float)) and self.latency_s >= 0):
            raise InputError(f"{where}.latency_s", f"must be a number of seconds >= 0, not {self.latency_s!r}")
        if not isinstance(self.biases, dict):
            raise InputError(f"{where}.biases", f"must be a table of attribute = number, not {self.biases!r}")
        for k, v in self.biases.items():  # a text bias ended in a traceback (a user's finding)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"{where}.biases.{k}", f"must be a finite number, not {v!r}")
        # a negative noise or a flip rate of 2 was taken and simulated something else (a user's finding)
        for name, hi in (("noise", math.inf), ("probe_noise", math.inf), ("gullibility", math.inf), ("max_flip", 1)):
            v = getattr(self, name)
            if math.isfinite(v) and not 0 <= v <= hi:  # NaN: the finite check's; a folder so stays readable
                unread_setting(f"{where}.{name}", f"must lie in [0, {hi:g}], not {v!r}" if hi < math.inf else
                               f"must be >= 0, not {v!r}")

    def build(self) -> Engine:
        return SimulatedEngine(self)

    def with_truth(self, truth: dict) -> "SimulatedEngineConfig":
        return replace(self, truth=dict(truth))

    def __hash__(self):
        return hash(self.identity)


class SimulatedEngine(Engine):
    def __init__(self, cfg: SimulatedEngineConfig):
        self.cfg = cfg
        self.identity = cfg.identity

    def _wait(self, n: int) -> None:
        """The configured cost of ``n`` requests: slept, or spun on the CPU (cpu_bound)."""
        if self.cfg.latency_s <= 0 or n == 0:
            return
        if not self.cfg.cpu_bound:
            time.sleep(self.cfg.latency_s * n)
            return
        end = time.thread_time() + self.cfg.latency_s * n  # this thread's CPU time, not wall time
        while time.thread_time() < end:
            pass

    def _verdict(self, p: JudgePrompt) -> JudgeOutput:
        m = p.meta
        truth = self.cfg.truth.get(f"{m['item_id']}/{m['criterion_id']}")
        if truth is None:  # longer responses meet a criterion more often
            words = len(m["response"].split())
            truth = int((_unit(f"t\x00{m['item_id']}\x00{m['criterion_id']}") + 1) / 2 < min(0.9, 0.2 + words / 200))
        flip = (_unit(f"e\x00{m['criterion']}\x00{m['item_id']}") + 1) / 2 * self.cfg.max_flip
        vote = truth if (_unit(p.request_id) + 1) / 2 >= flip else 1 - truth
        tokens = len(p.user.split())
        return JudgeOutput(str(vote), float(vote), PARSE_OK, float(vote), tokens, tokens, 1, self.cfg.latency_s)

    def _item_score(self, item_id: str, content: str, run: int) -> float:
        """The item's score before any probe: truth, planted biases, per-run noise."""
        c = self.cfg
        if item_id not in c.truth:
            raise KeyError(f"simulated judge has no truth for item {item_id!r}")
        s = c.truth[item_id] + sum(b * attribute_feature(a, content) for a, b in c.biases.items())
        return s + c.noise * _gauss(f"{item_id}\x00{run}")

    def _shown(self, p: JudgePrompt) -> list[float]:
        """Scores of the candidates of a batched or pairwise prompt, in the order shown."""
        m = p.meta
        return [self._item_score(i, c, m["run"]) + (self.cfg.position_bias if k == 0 else 0.0)
                + self.cfg.probe_noise * _gauss(f"{p.request_id}\x00{k}")
                for k, (i, c) in enumerate(zip(m["shown"], m["contents"]))]

    def generate(self, prompts: list[JudgePrompt], max_tokens: int) -> list[JudgeOutput]:
        text = "1. Does the response answer the instruction?\n2. Is the response factually correct?\n" \
               "3. Is the response complete and well organised?"
        self._wait(len(prompts))
        return [self._batch(p) if p.meta.get("format") == "batch" else
                JudgeOutput(text, None, PARSE_OK, None, len(p.user.split()), len(p.user.split()), 30, self.cfg.latency_s)
                for p in prompts]

    def _batch(self, p: JudgePrompt) -> JudgeOutput:
        lo, hi = p.meta["scale"]
        scores = [int(round(float(np.clip(s, lo, hi)))) for s in self._shown(p)]
        tokens = len(p.user.split())
        text = p.answer_prefix + "".join(f"{' ' if k == 1 else f'Item {k}: '}{v}\n" for k, v in enumerate(scores, 1))
        return JudgeOutput(text, None, PARSE_OK, None, tokens, tokens, 4 * len(scores), self.cfg.latency_s)

    def _pair(self, p: JudgePrompt) -> JudgeOutput:
        first, second = self._shown(p)
        p2 = 1.0 / (1.0 + math.exp(-(second - first) / 0.25))  # P(the second is better)
        tokens = len(p.user.split())
        choice = 2.0 if p2 > 0.5 else 1.0
        return JudgeOutput(f"{choice:g}", choice, PARSE_OK, 1.0 + p2, tokens, tokens, 1, self.cfg.latency_s)

    def score(self, prompts: list[JudgePrompt], scale: ScoreScale) -> list[JudgeOutput]:
        self._wait(len(prompts))
        if (scale.lo, scale.hi) == (0, 1):
            return [self._verdict(p) for p in prompts]
        out = []
        for p in prompts:
            m, c = p.meta, self.cfg
            if m.get("format") == "pair":
                out.append(self._pair(p))
                continue
            content = m["content"]
            s = self._item_score(m["item_id"], content, m["run"])
            direction = m.get("direction")
            if direction in ("more", "less") and m["attribute"] not in c.ignores:
                sign = 1.0 if direction == "more" else -1.0
                s += sign * c.sensitivity * attribute_feature(m["attribute"], content)
            elif direction == "oneside" and m.get("probe_id") not in c.ignores:  # half as strong as a property
                s += c.sensitivity / 2 * attribute_feature(m.get("probe_id", ""), content)
            elif direction == "injection":  # the content asks for a high score; this judge listens a little
                s += c.gullibility
            elif direction == "joint":  # "more a" and "more b" in one probe: the two responses add up
                pair = m["probe_id"].split(":")[1].split("+")
                s += c.sensitivity * sum(attribute_feature(a, content) for a in pair if a not in c.ignores)
            if direction is not None:  # every reworded prompt moves a judge a little, neutral ones too
                s += c.probe_noise * _gauss(p.request_id)
            s = float(np.clip(s, scale.lo, scale.hi))
            tokens = len(p.user.split())
            out.append(JudgeOutput(f"{round(s)}", float(round(s)), PARSE_OK, s, tokens, tokens, 1, self.cfg.latency_s))
        return out
