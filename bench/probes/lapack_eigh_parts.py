#!/usr/bin/env python3
"""Where one float32 eigh of a b × b factor goes in LAPACK, on one core: the whole of
ssyevd (divide and conquer, what torch.linalg.eigh calls) and ssyevr (MRRR, the
alternative), and ssyevd's parts: ssytrd (reduction to tridiagonal form), sstedc on the
tridiagonal (its eigenvectors) and, as the difference, the back-transformation. Calls
the LAPACK that LibTorch loads (Debian: OpenBLAS's) through ctypes, with OpenBLAS set to
one thread, as dash's eigh runs per core (kernels/stack_lapack.h).

    /usr/bin/python3 bench/probes/lapack_eigh_parts.py [--size 256] [--matrices 20] [--lapack PATH]

Run it with nothing else on the machine.
"""

import argparse
import ctypes
import ctypes.util
import time

import numpy as np

_char, _int, _float = ctypes.c_char, ctypes.c_int, ctypes.c_float


def _ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def _ref(value):
    return ctypes.byref(value)


class Lapack:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        openblas = ctypes.util.find_library("openblas")
        for library in [self.lib] + ([ctypes.CDLL(openblas)] if openblas else []):
            if hasattr(library, "openblas_set_num_threads"):
                library.openblas_set_num_threads(1)

    def call(self, name, *args):
        info = _int(0)
        getattr(self.lib, name + "_")(*args, _ref(info))
        if info.value != 0:
            raise RuntimeError(f"{name}: info {info.value}")

    def timed(self, name, fixed, integer_workspace=True):
        """name(*fixed, work, lwork[, iwork, liwork], info): one workspace query, then one timed call."""

        def arguments(lwork, liwork):
            work = np.empty(max(lwork, 1), np.float32)
            iwork = np.empty(max(liwork, 1), np.int32)
            args = fixed + [_ptr(work), _ref(_int(lwork))]
            if integer_workspace:
                args += [_ptr(iwork), _ref(_int(liwork))]
            return args, work, iwork  # the arrays must outlive the call

        args, work, iwork = arguments(-1, -1)
        self.call(name, *args)
        args, work, iwork = arguments(int(work[0]), int(iwork[0]) if integer_workspace else 0)
        start = time.perf_counter()
        self.call(name, *args)
        return time.perf_counter() - start


def symmetric_factors(size, count, seed=0):
    rng = np.random.default_rng(seed)
    result = []
    for _ in range(count):
        g = rng.standard_normal((size, size + 64)).astype(np.float32)
        result.append(np.asfortranarray(g @ g.T / size + np.float32(1e-3) * np.eye(size, dtype=np.float32)))
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--matrices", type=int, default=20)
    parser.add_argument("--lapack", default="liblapack.so.3")
    args = parser.parse_args()
    lapack = Lapack(args.lapack)
    n = args.size
    V, L, A, I = _char(b"V"), _char(b"L"), _char(b"A"), _char(b"I")  # jobz, uplo, range, compz
    times = {"ssyevd": [], "ssyevr": [], "ssytrd": [], "sstedc": []}
    for matrix in symmetric_factors(n, args.matrices):
        a = matrix.copy(order="F")
        w = np.empty(n, np.float32)
        times["ssyevd"].append(lapack.timed("ssyevd", [_ref(V), _ref(L), _ref(_int(n)), _ptr(a), _ref(_int(n)), _ptr(w)]))

        a = matrix.copy(order="F")
        z = np.empty((n, n), np.float32, order="F")
        found = _int(0)
        support = np.empty(2 * n, np.int32)
        zero = _float(0)
        times["ssyevr"].append(lapack.timed("ssyevr", [
            _ref(V), _ref(A), _ref(L), _ref(_int(n)), _ptr(a), _ref(_int(n)), _ref(zero), _ref(zero), _ref(_int(0)),
            _ref(_int(0)), _ref(zero), _ref(found), _ptr(w), _ptr(z), _ref(_int(n)), _ptr(support)]))

        a = matrix.copy(order="F")
        d, e, tau = (np.empty(n, np.float32) for _ in range(3))
        times["ssytrd"].append(lapack.timed(
            "ssytrd", [_ref(L), _ref(_int(n)), _ptr(a), _ref(_int(n)), _ptr(d), _ptr(e), _ptr(tau)],
            integer_workspace=False))
        vectors = np.empty((n, n), np.float32, order="F")  # of the tridiagonal (d, e) ssytrd left
        times["sstedc"].append(
            lapack.timed("sstedc", [_ref(I), _ref(_int(n)), _ptr(d), _ptr(e), _ptr(vectors), _ref(_int(n))]))

    median = {name: 1e3 * float(np.median(values)) for name, values in times.items()}
    print(f"float32, n = {n}, {args.matrices} matrices, one thread, median ms per matrix:")
    print(f"  ssyevd {median['ssyevd']:.2f}  (ssytrd {median['ssytrd']:.2f} + sstedc {median['sstedc']:.2f} "
          f"+ back-transformation and the rest {median['ssyevd'] - median['ssytrd'] - median['sstedc']:.2f})")
    print(f"  ssyevr {median['ssyevr']:.2f}  ({median['ssyevr'] / median['ssyevd']:.2f}× ssyevd)")


if __name__ == "__main__":
    main()
