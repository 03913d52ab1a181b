"""Warp kernels of the Warp tests, in one module so that Warp compiles them once (one module,
one CPU object). Imported by the tests through :mod:`warp_support`, after Warp is configured."""

import warp as wp


@wp.struct
class Gains:
    kp: float
    kd: float


@wp.kernel
def scale_add(
    x: wp.array(dtype=wp.float32),
    scale: float,
    bias: wp.array(dtype=wp.float32),
    y: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    y[i] = x[i] * scale + bias[i]


@wp.kernel
def rotate_into_body(
    q: wp.array(dtype=wp.quat), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)
):
    i = wp.tid()
    out[i] = wp.quat_rotate_inv(q[i], v[i])


@wp.kernel
def length_sum(v: wp.array(dtype=wp.vec3), total: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(total, 0, wp.length(v[i]))


@wp.kernel
def square_in_place(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] * x[i]


@wp.kernel
def transform(
    m: wp.array(dtype=wp.mat33), p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)
):
    i = wp.tid()
    out[i] = m[i] * p[i]


@wp.kernel
def pd_with_struct_array(
    gains: wp.array(dtype=Gains), error: wp.array(dtype=float), out: wp.array(dtype=float)
):
    i = wp.tid()
    out[i] = gains[i].kp * error[i]
