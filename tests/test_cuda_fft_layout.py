"""cuFFT layout arithmetic (nvmathpy.fft._cuda_layout) against hand-computed cases: pure Python."""

from __future__ import annotations

import pytest

from nvmathpy.fft._cuda_layout import (
    Many,
    dense_strides,
    inverse_order,
    memory_order,
    plan_many,
    schedule,
)


def fields(m: Many) -> tuple:
    return (m.rank, m.n, m.inembed, m.istride, m.idist, m.onembed, m.ostride, m.odist, m.batch, m.loops)


def one(s):
    assert s is not None and len(s.steps) == 1
    return s.steps[0]


# -- helpers ---------------------------------------------------------------------------------------


def test_memory_order_dense_strides_inverse():
    assert memory_order((2, 3, 4), (12, 4, 1)) == (0, 1, 2)
    assert memory_order((2, 3, 4), (1, 2, 6)) == (2, 1, 0)  # F order
    assert memory_order((2, 1, 4), (4, 99, 1)) == (0, 2, 1)  # extent-1 axes innermost, whatever their stride
    assert memory_order((3, 4), (-4, 1)) == (0, 1)  # by |stride|
    assert dense_strides((2, 3, 4), (2, 0, 1)) == (3, 1, 6)
    assert inverse_order((2, 0, 1)) == (1, 2, 0)


def test_offsets_of_two_loops():
    m = Many(1, (4,), (4,), 1, 4, (4,), 1, 4, 3, loops=((2, 1000, 100), (3, 10, 1)))
    assert m.calls == 6
    assert m.offsets() == [(0, 0), (10, 1), (20, 2), (1000, 100), (1010, 101), (1020, 102)]


# -- plan_many --------------------------------------------------------------------------------------


def test_rows_and_columns_of_a_c_matrix():
    # rows of a C-ordered 6 x 4: unit stride, 6 rows 4 apart
    assert fields(plan_many([4], [1], (6, 4), (4, 1), (6, 4), (4, 1))) == (1, (4,), (4,), 1, 4, (4,), 1, 4, 6, ())
    # columns: stride 4, 4 columns 1 apart
    assert fields(plan_many([6], [0], (6, 4), (4, 1), (6, 4), (4, 1))) == (1, (6,), (6,), 4, 1, (6,), 4, 1, 4, ())


def test_batched_2d_and_3d_without_batch():
    # (5, 6, 7) C, axes (1, 2): rank 2, 5 batches 42 apart
    assert fields(plan_many([6, 7], [1, 2], (5, 6, 7), (42, 7, 1), (5, 6, 7), (42, 7, 1))) == (
        2, (6, 7), (6, 7), 1, 42, (6, 7), 1, 42, 5, ())
    # (3, 4, 5) all axes: one transform, idist = the whole span
    assert fields(plan_many([3, 4, 5], [0, 1, 2], (3, 4, 5), (20, 5, 1), (3, 4, 5), (20, 5, 1))) == (
        3, (3, 4, 5), (3, 4, 5), 1, 60, (3, 4, 5), 1, 60, 1, ())


def test_middle_axis_needs_a_loop():
    # (2, 5, 3) C, axis 1: stride 3; batch axes 0 (2 x 15) and 2 (3 x 1) do not collapse:
    # the larger (axis 2) is cuFFT's batch, axis 0 an outer loop of 2 calls 15 elements apart
    m = plan_many([5], [1], (2, 5, 3), (15, 3, 1), (2, 5, 3), (15, 3, 1))
    assert fields(m) == (1, (5,), (5,), 3, 1, (5,), 3, 1, 3, ((2, 15, 15),))
    assert m.offsets() == [(0, 0), (15, 15)]


def test_batch_axes_collapse():
    # (2, 3, 8) C, axis 2: the batch axes 0 and 1 collapse into 6 batches 8 apart
    assert fields(plan_many([8], [2], (2, 3, 8), (24, 8, 1), (2, 3, 8), (24, 8, 1)))[-2:] == (6, ())


def test_interleaved_2d_embedding():
    # (5, 7, 3) C, axes (0, 2): inembed[1] = 21 (the rows of axis 0 are 21 apart), batch axis 1: 7 x 3
    m = plan_many([5, 3], [0, 2], (5, 7, 3), (21, 3, 1), (5, 7, 3), (21, 3, 1))
    assert fields(m) == (2, (5, 3), (5, 21), 1, 3, (5, 21), 1, 3, 7, ())


def test_cropped_view_and_r2c_extents():
    # x[:, :6] of an 8 x 10 array, rfft along axis 1 into a dense 8 x 4 result
    m = plan_many([6], [1], (8, 6), (10, 1), (8, 4), (4, 1))
    assert fields(m) == (1, (6,), (6,), 1, 10, (4,), 1, 4, 8, ())
    # rfft2 of (4, 6): the real axis 1 halves to 4 in the output embedding
    m = plan_many([4, 6], [0, 1], (4, 6), (6, 1), (4, 4), (4, 1))
    assert (m.inembed, m.onembed, m.idist, m.odist) == ((4, 6), (4, 4), 24, 16)


def test_not_expressible():
    assert plan_many([4, 3], [0, 1], (4, 3), (7, 2), (4, 3), (3, 1)) is None  # 7 is no multiple of 2
    assert plan_many([4, 3], [0, 1], (4, 3), (2, 1), (4, 3), (3, 1)) is None  # rows overlap (2 < 3)
    assert plan_many([4, 3], [1, 0], (4, 3), (3, 1), (4, 3), (3, 1)) is None  # axis 1 outside axis 0
    assert plan_many([4], [1], (3, 4), (0, 1), (3, 4), (4, 1)) is None  # broadcast batch (stride 0)


def test_extent_one_axes_nest_anywhere():
    m = plan_many([1, 5], [0, 1], (1, 5), (999, 1), (1, 5), (5, 1))
    assert (m.n, m.inembed, m.istride, m.batch) == ((1, 5), (1, 5), 1, 1)


# -- schedules -------------------------------------------------------------------------------------


def test_c2c_strided_reads_the_operand():
    s = schedule("c2c", [0], [8], (8, 3), (8, 3), (3, 1), (0, 1), "strided")
    assert (s.x_order, s.y_order, s.copies, s.calls) == (None, (0, 1), 0, 1)
    assert (one(s).kind, one(s).source, one(s).target) == ("c2c", "x", "y")
    assert fields(one(s).many) == (1, (8,), (8,), 3, 1, (8,), 3, 1, 3, ())


def test_transposed_f_order_operand_keeps_its_order():
    # a 4 x 6 F-ordered operand (strides (1, 4)): cuFFT order is axis 1 then axis 0, result F-ordered too
    s = schedule("c2c", [0, 1], [4, 6], (4, 6), (4, 6), (1, 4), (1, 0), "strided")
    assert s.y_order == (1, 0)
    assert fields(one(s).many) == (2, (6, 4), (6, 4), 1, 24, (6, 4), 1, 24, 1, ())


def test_r2c_with_the_real_axis_outside():
    # rfft2(x, axes=(1, 0)) of a C-ordered 4 x 6: the real axis 0 has the larger stride
    args = ("r2c", [1, 0], [6, 4], (4, 6), (3, 6), (6, 1), (0, 1))
    assert schedule(*args, "strided") is None
    per_axis = schedule(*args, "per_axis")
    assert [(st.kind, st.source, st.target) for st in per_axis.steps] == [("r2c", "x", "y"), ("c2c", "y", "y")]
    assert fields(per_axis.steps[0].many) == (1, (4,), (4,), 6, 1, (3,), 6, 1, 6, ())
    assert fields(per_axis.steps[1].many) == (1, (6,), (6,), 1, 6, (6,), 1, 6, 3, ())
    transposed = schedule(*args, "transposed")
    assert (transposed.x_order, transposed.y_order) == ((1, 0), (1, 0))
    assert fields(one(transposed).many) == (2, (6, 4), (6, 4), 1, 24, (6, 3), 1, 18, 1, ())


def test_transposed_moves_batch_axes_outside():
    # fft over axis 1 of (2, 5, 3): canonical order (0, 2, 1), 6 batches of 5, no loop
    s = schedule("c2c", [1], [5], (2, 5, 3), (2, 5, 3), (15, 3, 1), (0, 1, 2), "transposed")
    assert (s.x_order, s.y_order, s.calls) == ((0, 2, 1), (0, 2, 1), 1)
    assert fields(one(s).many) == (1, (5,), (5,), 1, 5, (5,), 1, 5, 6, ())


def test_c2r_always_copies_its_input():
    s = schedule("c2r", [1], [8], (3, 5), (3, 8), None, (0, 1), "strided")
    assert (s.x_order, s.copies) == ((0, 1), 1)
    assert fields(one(s).many) == (1, (8,), (5,), 1, 5, (8,), 1, 8, 3, ())
    assert schedule("c2r", [1], [8], (3, 5), (3, 8), (5, 1), (0, 1), "strided").x_order == (0, 1)


def test_more_than_three_axes():
    shape = (2, 3, 4, 5)
    c = schedule("c2c", [0, 1, 2, 3], list(shape), shape, shape, (60, 20, 5, 1), (0, 1, 2, 3), "strided")
    assert [(st.kind, st.source, st.target, st.many.n) for st in c.steps] == [
        ("c2c", "x", "y", (3, 4, 5)), ("c2c", "y", "y", (2,))]
    assert fields(c.steps[1].many) == (1, (2,), (2,), 60, 1, (2,), 60, 1, 60, ())
    out = (2, 3, 4, 3)
    r = schedule("r2c", [0, 1, 2, 3], list(shape), shape, out, (60, 20, 5, 1), (0, 1, 2, 3), "strided")
    assert [(st.kind, st.source, st.target, st.many.n) for st in r.steps] == [
        ("r2c", "x", "y", (3, 4, 5)), ("c2c", "y", "y", (2,))]
    i = schedule("c2r", [0, 1, 2, 3], list(shape), out, shape, None, (0, 1, 2, 3), "strided")
    assert [(st.kind, st.source, st.target, st.many.n) for st in i.steps] == [
        ("c2c", "x", "x", (2,)), ("c2r", "x", "y", (3, 4, 5))]
    assert fields(i.steps[0].many) == (1, (2,), (2,), 36, 1, (2,), 36, 1, 36, ())


def test_in_place():
    s = schedule("c2c", [1], [6], (4, 6), (4, 6), (6, 1), (0, 1), "strided", inplace=True)
    assert (s.x_order, s.y_order) == (None, None)
    assert (one(s).source, one(s).target) == ("x", "x")
    assert schedule("c2c", [1], [6], (4, 6), (4, 6), None, (0, 1), "strided", inplace=True) is None
    assert schedule("c2c", [1], [6], (4, 6), (4, 6), (6, 1), (0, 1), "transposed", inplace=True) is None


def test_length_one_axes():
    s = schedule("c2c", [0, 1], [1, 6], (1, 6), (1, 6), (6, 1), (0, 1), "strided")
    assert one(s).many.n == (6,)
    assert schedule("c2c", [0], [1], (1, 6), (1, 6), (6, 1), (0, 1), "strided").steps == ()
    r = schedule("r2c", [0], [1], (1, 6), (1, 6), (6, 1), (0, 1), "strided")
    assert one(r).many.n == (1,)  # the real axis always gets its plan


def test_per_axis_needs_two_axes_and_unknown_strategy():
    assert schedule("c2c", [1], [6], (4, 6), (4, 6), (6, 1), (0, 1), "per_axis") is None
    with pytest.raises(ValueError, match="unknown strategy"):
        schedule("c2c", [1], [6], (4, 6), (4, 6), (6, 1), (0, 1), "fastest")
