"""bench/stats.py against figures worked out by hand (ctest: bench_stats)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402


class BinomialTail(unittest.TestCase):
    def test_exact_sums(self):
        # P(X <= 1) for n = 10: (1 + 10) / 1024.
        self.assertEqual(stats.binomial_tail(10, 1), 11 / 1024)
        self.assertEqual(stats.binomial_tail(10, 2), 56 / 1024)
        self.assertEqual(stats.binomial_tail(10, -1), 0.0)
        self.assertEqual(stats.binomial_tail(4, 9), 1.0)


class MedianInterval(unittest.TestCase):
    def test_ten_values_take_the_second_and_ninth(self):
        # P(X <= 1) = 11/1024 <= 0.025 < P(X <= 2) = 56/1024: k = 2.
        low, high, coverage = stats.median_interval([7, 1, 3, 10, 5, 2, 9, 4, 8, 6])
        self.assertEqual((low, high), (2, 9))
        self.assertAlmostEqual(coverage, 1 - 22 / 1024)

    def test_six_values_are_the_fewest_for_95_percent(self):
        # n = 6: P(X = 0) = 1/64 <= 0.025, so the extremes; n = 5: 1/32 > 0.025.
        low, high, coverage = stats.median_interval([3, 1, 2, 6, 5, 4])
        self.assertEqual((low, high), (1, 6))
        self.assertAlmostEqual(coverage, 1 - 2 / 64)
        self.assertIsNone(stats.median_interval([1, 2, 3, 4, 5]))

    def test_lower_confidence_narrows_it(self):
        # n = 10 at 50%: P(X <= 3) = 176/1024 <= 0.25 < P(X <= 4) = 386/1024: k = 4.
        low, high, coverage = stats.median_interval(list(range(1, 11)), confidence=0.5)
        self.assertEqual((low, high), (4, 7))
        self.assertAlmostEqual(coverage, 1 - 2 * 176 / 1024)

    def test_forty_one_rounds(self):
        # n = 41: P(X <= 13) = 0.0138 <= 0.025 < P(X <= 14) = 0.0298: k = 14.
        low, high, _ = stats.median_interval(list(range(41)))
        self.assertEqual((low, high), (13, 27))


class Summary(unittest.TestCase):
    def test_rounds_are_paired_not_pooled(self):
        # A slow spell that doubles everything begins between round 4's bare run
        # and its memtool run. Pooled medians say 2.2 / 1.0; the rounds say 1.10,
        # round 4 alone 2.2.
        bare = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
        mode = [1.1, 1.1, 1.1, 2.2, 2.2, 2.2, 2.2]
        s = stats.summary(mode, bare)
        self.assertAlmostEqual(s["paired"], 1.1)
        # n = 7: k = 1, the extremes, with probability 1 - 2/128.
        self.assertAlmostEqual(s["interval"][0], 1.1)
        self.assertAlmostEqual(s["interval"][1], 2.2)
        self.assertAlmostEqual(s["coverage"], 1 - 2 / 128)
        self.assertAlmostEqual(s["least"], 1.1)

    def test_a_tool_that_failed_pairs_only_the_rounds_it_ran(self):
        s = stats.summary([3.0, 6.0], [1.0, 2.0, 9.0])
        self.assertEqual(s["paired"], 3.0)
        self.assertIsNone(s["interval"])
        self.assertEqual(s["least"], 3.0)


if __name__ == "__main__":
    unittest.main()
