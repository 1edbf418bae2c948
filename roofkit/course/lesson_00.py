"""Lesson 00, start here: how a question checks your answer."""

from ..quiz import Misconception, Question, register

register(
    Question(
        id="l00.warmup-fma",
        lesson="00",
        kind="numeric",
        prompt="A fused multiply-add d = a*b + c runs {fmas} times. How many FLOPs is that?",
        params={"fmas": 1000},
        key=lambda fmas: 2 * fmas,  # one FMA is a multiply and an add: 2 FLOPs (lesson 01)
        unit="FLOP",
        rtol=0,
        hints=("Count the operations inside one FMA: a multiply, then ...", "An FMA is one instruction but two floating-point operations."),
        misconceptions=(Misconception("fma-is-one-flop", "An FMA is one instruction but two FLOPs: a multiply and an add.", scale=0.5),),
    ),
)
