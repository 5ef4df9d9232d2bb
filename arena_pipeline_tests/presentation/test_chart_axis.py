"""The charts' value axis: any finite values draw (equal ones of any size, +-1.8e308), in order, on the axis."""

from __future__ import annotations

import math
import sys
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from arena_pipeline.presentation.charts import _axis, benchmark_scatter_svg

BIG = sys.float_info.max
CASES = {
    "none": [],
    "one rating": [1000.0],
    "equal, 2e6": [2e6, 2e6],  # divided by zero: the flat range's step was lost in 2e6 / 2e-10
    "equal, 5e6": [5e6] * 4,
    "equal, 1e300": [1e300] * 3,
    "equal, largest float": [BIG, BIG],
    "equal, -largest float": [-BIG, -BIG],
    "the whole float range": [-BIG, 0.0, BIG],  # hi - lo overflowed to inf
    "+-1.7e308": [-1.7e308, 1.7e308],
    "one ulp apart, large": [1e6, math.nextafter(1e6, 2e6)],
    "tiny": [1e-300, 3e-300],
    "ratings": [912.5, 1000.0, 1234.56],
    "quarter steps": [0.1, 0.35],
    "billions": [5e9, 7.25e9],
}


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
def test_any_finite_values_draw_in_order_on_the_axis(values):
    start, length = 58.0, 348.0
    at, ticks = _axis([*values, None, math.inf, math.nan], 5, start, length)
    positions = [at(v) for v in values]
    assert all(p is not None and start <= p <= start + length for p in positions), positions
    assert positions == sorted(positions)  # order kept
    if len(set(values)) > 1 and max(values) - min(values) > 1e-6 * max(1.0, *map(abs, values)):
        assert len(set(positions)) == len(set(values))  # values apart are drawn apart
    assert at(None) is None and at(math.inf) is None and at(math.nan) is None
    tick_positions = [p for p, _ in ticks]
    labels = [label for _, label in ticks]
    assert 2 <= len(ticks) <= 12 and tick_positions == sorted(set(tick_positions))
    assert tick_positions[0] == start and tick_positions[-1] == start + length
    assert len(set(labels)) == len(labels) and all(len(label) <= 16 for label in labels), labels
    assert all(math.isfinite(p) for p in tick_positions)


def test_labels_are_exact_and_readable():
    _, ticks = _axis([0.1, 0.35], 5, 0, 100)
    assert [label for _, label in ticks] == ["0.10", "0.15", "0.20", "0.25", "0.30", "0.35"]
    _, ticks = _axis([900.0, 1300.0], 4, 0, 100)
    assert [label for _, label in ticks] == ["900", "1,000", "1,100", "1,200", "1,300"]
    _, ticks = _axis([-1.7e308, 1.7e308], 4, 0, 100)
    assert [label for _, label in ticks] == ["-2e+308", "-1e+308", "0", "1e+308", "2e+308"]
    at, ticks = _axis([2e6, 2e6], 5, 0, 100)  # a flat range: the value in the middle of its order of magnitude
    assert at(2e6) == 60.0 and ("60.0", "2,000,000") == (f"{ticks[3][0]}", ticks[3][1])


def test_benchmark_scatter_draws_scores_beyond_the_validation_bound():
    """A warehouse written before scores were bounded (|score| <= 1e6) may hold any finite score: the
    report still draws it (an OverflowError or ZeroDivisionError failed the whole report)."""
    for scores in ([5e6, 5e6, 5e6], [-1.7e308, 0.0, 1.7e308], [BIG, BIG, BIG]):
        points = pl.DataFrame({"model": ["a", "b", "c"], "score": scores, "rating": [1000.0, 1010.0, 990.0],
                               "ci_lower": [-5.0, 2.0, -20.0], "ci_upper": [5.0, 18.0, -1.0],
                               "our_rank": [2, 1, 3], "benchmark_rank": [1, 2, 3]})
        root = ET.fromstring(benchmark_scatter_svg(points, "odd", "overall", "s"))
        cx = [float(c.get("cx")) for c in root.iter("{http://www.w3.org/2000/svg}circle")]
        assert len(cx) == 3 and all(map(math.isfinite, cx)), (scores, cx)
