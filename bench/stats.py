"""The figures bench/run.py reports for a mode against bare, from the same rounds.

This VM's noise is larger than the differences the goals ask about, two ways:
slow spells that move every process alike for minutes (bare runs of one program
differ by up to 50% between invocations), and scatter from one run to the next
within an invocation (30 rounds of small_tensors: bare 1.14 to 1.78 s, bench/history/
runs.md run 30). A ratio of two medians mixes spells into both; the ratio of
the two runs of one round does not, since they ran seconds apart. So each round
gives one paired ratio (the mode's run over that round's bare run), and a goal is
judged by their median and a confidence interval for it, which is as wide as the
scatter and narrows only with more rounds.

The interval is distribution-free (the sign test's): the median of the rounds'
true ratios lies between the k-th smallest and the k-th largest paired ratio with
probability 1 - 2 P(Binomial(n, 1/2) < k), for the largest k that keeps that at or
above the confidence asked. It assumes nothing of the noise's shape; it needs
n >= 6 rounds for 95%.
"""
import math
import statistics


def binomial_tail(n, k):
    """P(Binomial(n, 1/2) <= k), exactly (as a float)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2 ** n


def median_interval(values, confidence=0.95):
    """(low, high, coverage): the distribution-free interval for the median of
    `values`' population, and the probability it holds it (at least `confidence`),
    or None when there are too few values for that confidence."""
    xs = sorted(values)
    n = len(xs)
    alpha = 1.0 - confidence
    k = 0  # order statistics x_(k) and x_(n-k+1), counted from 1
    while k + 1 <= n // 2 and binomial_tail(n, k) <= alpha / 2:
        k += 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k], 1.0 - 2.0 * binomial_tail(n, k - 1)


def paired_ratios(mode_times, bare_times):
    """Each round's mode time over the same round's bare time. Rounds where either
    has no run (a comparison tool that failed) are left out."""
    return [m / b for m, b in zip(mode_times, bare_times) if b > 0]


def summary(mode_times, bare_times, confidence=0.95):
    """The paired figures of one mode: {"paired": median ratio, "interval": [low,
    high] or None, "coverage": the interval's probability or None, "least": the
    least run's time over bare's least}."""
    ratios = paired_ratios(mode_times, bare_times)
    out = {"paired": statistics.median(ratios) if ratios else None, "interval": None, "coverage": None,
           "least": min(mode_times) / min(bare_times) if mode_times and bare_times else None}
    ci = median_interval(ratios, confidence) if ratios else None
    if ci:
        out["interval"] = [ci[0], ci[1]]
        out["coverage"] = ci[2]
    return out
