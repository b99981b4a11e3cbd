"""A synthetic pod list shaped like Alibaba's cluster-trace-gpu-v2023 `openb_pod_list_default.csv`.

The real trace is public research data and stays out of the repository; this writes rows in its
layout (name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time) drawn from its published shape, so that `gpugov trace import alibaba`
reads them as it reads the real file:

- about 8,150 pods over 149 days: QoS LS 57%, BE 42%, Burstable 1.2%, Guaranteed 0.1%; 13% of them
  CPU-only, and 12% of the GPU pods never scheduled (Pending);
- of the 7,064 GPU pods 99% ask one GPU, 44% of those a share of it (`gpu_milli`: BE mostly 810,
  470 or 320, LS 470, 650 or 460); the rest 2, 4 or 8 (LS, and a fifth of Burstable asks 8);
- 20 pods created in the first 115 days that run for weeks (to the end, but one 8-GPU pod of
  15 days), then the bulk created over the last 34 days, with the trace's day-to-day and hour-of-day swings and pods that
  arrive a few together;
- runs drawn per QoS from the trace's own quantiles (median of all 10 minutes, 90th percentile
  2.2 hours; BE short, Burstable long), CPU and memory from each QoS's usual pod shapes (the trace
  has 126 distinct (cpu, memory, gpu_milli, num_gpu) shapes).

Imported with `--map LS=inference --map BE=nlp --map '*=vision'` and replayed against the example
organisation's cluster east, it is, like the real trace, a backlog of weeks for inference and vision.
The same seed and size give the same text.
"""

from __future__ import annotations

import bisect
import math
import random

HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
          "creation_time,deletion_time,scheduled_time")
DAY = 86_400
SPAN_S = 12_902_960  # 149.3 days, the trace's last deletion
BULK_FROM_S = 115 * DAY  # before this, only a few long-running pods were created
PODS = 8150

# QoS -> (share of pods, CPU-only share, share of GPU pods never scheduled)
QOS = {"LS": (0.570, 0.137, 0.105), "BE": (0.417, 0.132, 0.149), "Burstable": (0.0123, 0.01, 0.02),
       "Guaranteed": (0.0009, 0.14, 0.0)}
# QoS -> ((num_gpu, weight), ...)
GPUS = {"LS": ((1, 3959), (2, 15), (4, 14), (8, 23)), "BE": ((1, 1),),
        "Burstable": ((1, 76), (2, 1), (4, 1), (8, 21)), "Guaranteed": ((1, 1),)}
# QoS -> (share of one-GPU pods asking part of the device, ((gpu_milli, weight), ...))
SHARES = {
    "LS": (0.19, ((470, 390), (650, 237), (460, 128), (370, 2), (440, 1), (110, 1))),
    "BE": (0.79, ((810, 1078), (470, 360), (320, 328), (230, 140), (590, 75), (160, 74), (550, 72), (220, 62),
                  (370, 45), (110, 24), (480, 19), (50, 7))),
    "Burstable": (0.0, ()),
    "Guaranteed": (0.0, ()),
}
# QoS -> its usual pod shapes ((cpu_milli, memory_mib), weight); LS adds a tail of rarer ones below.
SHAPES = {
    "LS": (((11300, 49152), 857), ((11908, 47104), 625), ((11400, 48128), 534), ((18708, 64512), 255),
           ((9810, 41560), 195), ((15700, 58368), 158), ((16000, 32768), 108), ((4000, 24576), 104),
           ((12000, 24576), 101), ((8000, 16384), 101), ((12000, 16384), 99), ((14200, 58368), 93)),
    "BE": (((3152, 5600), 1592), ((8000, 30517), 483), ((4000, 22888), 189), ((4000, 15258), 181),
           ((11908, 47104), 153), ((4152, 10600), 152), ((4000, 30517), 136), ((6000, 22888), 28),
           ((1000, 2048), 26), ((8000, 32768), 5), ((6000, 30517), 2), ((8710, 41560), 1)),
    "Burstable": (((12000, 24576), 52), ((88000, 327680), 18), ((7000, 30000), 11), ((12000, 47104), 8),
                  ((8000, 16384), 3), ((120000, 737280), 3), ((14000, 60000), 1), ((32000, 131072), 1),
                  ((12000, 49152), 1)),
    "Guaranteed": (((8000, 30517), 3), ((12000, 47104), 3)),
}
LS_TAIL_SHAPES, LS_TAIL_WEIGHT = 60, 736  # LS has 73 shapes; the 61 rarer ones hold 21% of its pods
# QoS -> run time (s) at the quantiles QUANTILES, from the trace's pods created in its last 37 days
QUANTILES = (0, .05, .1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .98, .99, .995, 1)
RUNS = {
    "LS": (13, 54, 75, 221, 446, 658, 971, 1439, 2158, 3636, 6372, 12780, 36083, 82310, 446750, 3136123),
    "BE": (4, 33, 57, 116, 159, 203, 249, 398, 930, 1636, 7365, 17388, 39216, 60796, 79992, 521659),
    "Burstable": (12, 29, 48, 115, 276, 3413, 3660, 4140, 22446, 58300, 116945, 236343, 977323, 1690843,
                  1690843, 1690843),
    "Guaranteed": (474, 474, 474, 957, 957, 1857, 3836, 3836, 2281963, 2281963, 2342233, 2342233, 2342233,
                   2342233, 2342233, 2342233),
}
EARLY_PODS = 20  # per 8,150: GPU pods created before BULK_FROM_S, LS but one Burstable, that run for weeks
# Pods created per hour of the day (UTC), in the trace's bulk.
HOURS = (354, 334, 253, 343, 332, 258, 231, 235, 187, 115, 194, 177, 132, 122, 113, 158, 235, 321, 419, 363,
         275, 330, 303, 399)


def _pick(rng: random.Random, weighted: tuple[tuple[object, int], ...]) -> object:
    return rng.choices([value for value, _ in weighted], weights=[weight for _, weight in weighted])[0]


def _run_s(rng: random.Random, qos: str) -> int:
    """A run time drawn from the QoS's quantiles, log-linear between them."""
    u = rng.random()
    at = min(len(QUANTILES) - 1, max(1, bisect.bisect_right(QUANTILES, u)))
    lo_q, hi_q = QUANTILES[at - 1], QUANTILES[at]
    lo, hi = math.log(RUNS[qos][at - 1]), math.log(RUNS[qos][at])
    return max(1, round(math.exp(lo + (hi - lo) * (u - lo_q) / (hi_q - lo_q))))


def _ls_shapes(rng: random.Random) -> tuple[tuple[tuple[int, int], int], ...]:
    tail = []
    for _ in range(LS_TAIL_SHAPES):
        cpu = rng.choice((2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 24000, 32000)) + rng.choice((0, 300, 908))
        tail.append(((cpu, cpu * rng.choice((2, 3, 4, 5)) + rng.choice((0, 1024, 2048))),
                     max(1, round(LS_TAIL_WEIGHT / LS_TAIL_SHAPES * rng.expovariate(1)))))
    return SHAPES["LS"] + tuple(tail)


def _shares_of_shapes(rng: random.Random, qos: str, shapes: tuple[tuple[tuple[int, int], int], ...]
                      ) -> dict[tuple[int, int], tuple[int, ...]]:
    """The gpu_milli values each pod shape of `qos` comes with, as in the trace, where a shape of
    an LS pod nearly always has one (whole or a share) and a BE shape a few shares besides whole."""
    share, values = SHARES[qos]
    result: dict[tuple[int, int], tuple[int, ...]] = {}
    if qos == "BE":
        for shape, _ in shapes:
            result[shape] = tuple(sorted({int(_pick(rng, values)) for _ in range(4)}))  # type: ignore[call-overload]
        return result
    total, held = sum(weight for _, weight in shapes), 0
    for shape, weight in sorted(shapes, key=lambda _: rng.random()):
        if values and held + weight / 2 < share * total:
            result[shape] = (int(_pick(rng, values)),)  # type: ignore[call-overload]
            held += weight
        else:
            result[shape] = ()
    return result


def _bulk_times(rng: random.Random, count: int) -> list[int]:
    """`count` creation seconds over the bulk's days: each day its own volume, each hour the
    trace's share of the day, and arrivals a few together (a pod's next sibling seconds later)."""
    days = (SPAN_S - BULK_FROM_S) / DAY
    day_weights = [rng.lognormvariate(0, 0.45) for _ in range(math.ceil(days))]
    times: list[int] = []
    while len(times) < count:
        day = rng.choices(range(len(day_weights)), weights=day_weights)[0]
        hour = rng.choices(range(24), weights=HOURS)[0]
        start = BULK_FROM_S + day * DAY + hour * 3600 + rng.randrange(3600)
        for _ in range(min(count - len(times), 1 + int(rng.expovariate(1 / 1.2)))):
            if start < SPAN_S:
                times.append(start)
            start += int(rng.expovariate(1 / 25))
    return sorted(times)


def openb_pod_list(seed: int = 42, pods: int = PODS) -> str:
    """The CSV text of `pods` pods in the openb_pod_list layout."""
    rng = random.Random(seed)
    shapes = {qos: _ls_shapes(rng) if qos == "LS" else SHAPES[qos] for qos in QOS}
    milli_of = {qos: _shares_of_shapes(rng, qos, shapes[qos]) for qos in QOS}
    early = max(1, round(pods * EARLY_PODS / PODS))
    qos_of = ["Burstable"] + ["LS"] * (early - 1) + rng.choices(
        list(QOS), weights=[share for share, _, _ in QOS.values()], k=pods - early)
    created = [BULK_FROM_S - 6 * DAY, *sorted(rng.randrange(BULK_FROM_S) for _ in range(early - 1)),
               *_bulk_times(rng, pods - early)]
    rows: list[tuple[int, str]] = []
    for n, (qos, creation) in enumerate(zip(qos_of, created, strict=True)):
        _, cpu_only, pending = QOS[qos]
        if n < early:  # one of the few that run for weeks: the Burstable one 15 days, the others to the end
            gpus = 8 if qos == "Burstable" else 1
            run = 15 * DAY if qos == "Burstable" else SPAN_S - creation - rng.randrange(14 * DAY)
        else:
            gpus = 0 if rng.random() < cpu_only else int(_pick(rng, GPUS[qos]))  # type: ignore[call-overload]
            run = _run_s(rng, qos)
        shape = _pick(rng, shapes[qos])
        cpu, memory = shape  # type: ignore[misc]
        share, _ = SHARES[qos]
        options = milli_of[qos][shape]  # type: ignore[index]
        milli = 0 if not gpus else 1000
        if gpus == 1 and options and (qos == "LS" or rng.random() < share):
            milli = rng.choice(options)
        wait = min(int(rng.expovariate(1 / 60)) if rng.random() < 0.4 else rng.randrange(3), SPAN_S - creation)
        scheduled = creation + wait
        deletion = min(SPAN_S, scheduled + run)
        phase = "Pending" if gpus and n >= early and rng.random() < pending else (
            "Running" if deletion == SPAN_S or rng.random() < 0.6 else rng.choice(("Succeeded", "Failed")))
        if phase == "Pending":
            row = f"{cpu},{memory},{gpus},{milli},,{qos},Pending,{creation},{creation + rng.randrange(DAY)},"
        else:
            row = f"{cpu},{memory},{gpus},{milli},,{qos},{phase},{creation},{max(deletion, scheduled + 1)},{scheduled}"
        rows.append((creation, row))
    rows.sort(key=lambda item: item[0])
    lines = [HEADER] + [f"openb-pod-{n:04d},{row}" for n, (_, row) in enumerate(rows)]
    return "\n".join(lines) + "\n"
