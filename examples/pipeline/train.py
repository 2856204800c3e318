#!/usr/bin/env python3
"""Train a tiny model and pickle it to ``model.pkl`` in the current directory.

Plain Python, no dependencies: a linear model fitted by least squares (the
normal equations, solved by Gaussian elimination) on a generated dataset,
``y = 2 x1 - x2 + 0.5 x3 + 3 + noise``, with a held-out split for the metrics.

    python3 train.py            # 5000 samples
    python3 train.py --dummy    # 64 samples: the fast smoke test

The pickle holds only built-in types (a dict), so it loads anywhere::

    {"kind": "linear", "weights": [...], "bias": ..., "params": {...}, "metrics": {...}}
"""

from __future__ import annotations

import argparse
import os
import pickle
import platform
import random
import sys
import time
from typing import Dict, List, Sequence, Tuple

TRUE_WEIGHTS = (2.0, -1.0, 0.5)
TRUE_BIAS = 3.0


def make_data(samples: int, noise: float, seed: int) -> Tuple[List[List[float]], List[float]]:
    rng = random.Random(seed)  # noqa: S311 - reproducible data, not secrets
    rows, targets = [], []
    for _ in range(samples):
        x = [rng.uniform(-1.0, 1.0) for _ in TRUE_WEIGHTS]
        y = sum(w * v for w, v in zip(TRUE_WEIGHTS, x)) + TRUE_BIAS + rng.gauss(0.0, noise)
        rows.append(x)
        targets.append(y)
    return rows, targets


def solve(matrix: List[List[float]], vector: List[float]) -> List[float]:
    """Solve ``matrix @ x = vector`` by Gaussian elimination with partial pivoting."""
    size = len(vector)
    a = [row[:] + [value] for row, value in zip(matrix, vector)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(a[r][column]))
        if abs(a[pivot][column]) < 1e-12:
            raise ValueError("singular system: not enough distinct samples")
        a[column], a[pivot] = a[pivot], a[column]
        for row in range(column + 1, size):
            factor = a[row][column] / a[column][column]
            for k in range(column, size + 1):
                a[row][k] -= factor * a[column][k]
    solution = [0.0] * size
    for row in reversed(range(size)):
        rest = sum(a[row][k] * solution[k] for k in range(row + 1, size))
        solution[row] = (a[row][size] - rest) / a[row][row]
    return solution


def fit(rows: Sequence[Sequence[float]], targets: Sequence[float]) -> Tuple[List[float], float]:
    """Least squares with an intercept: solve (XᵀX) β = Xᵀy."""
    design = [[*row, 1.0] for row in rows]
    width = len(design[0])
    gram = [[sum(r[i] * r[j] for r in design) for j in range(width)] for i in range(width)]
    moment = [sum(r[i] * y for r, y in zip(design, targets)) for i in range(width)]
    beta = solve(gram, moment)
    return beta[:-1], beta[-1]


def predict(model: Dict, row: Sequence[float]) -> float:
    return sum(w * v for w, v in zip(model["weights"], row)) + model["bias"]


def scores(model: Dict, rows: Sequence[Sequence[float]], targets: Sequence[float]) -> Dict:
    errors = [predict(model, row) - y for row, y in zip(rows, targets)]
    mse = sum(e * e for e in errors) / len(errors)
    mean = sum(targets) / len(targets)
    total = sum((y - mean) ** 2 for y in targets) or 1.0
    return {"mse": mse, "r2": 1.0 - sum(e * e for e in errors) / total}


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dummy", action="store_true", help="a small run (64 samples)")
    parser.add_argument("--samples", type=int, default=None, help="default 5000 (64 with --dummy)")
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output", default="model.pkl")
    parser.add_argument("--fail", action="store_true", help="exit 3 without a model (tests)")
    args = parser.parse_args(list(argv) or None)
    if args.fail:
        print("train.py: failing on purpose (--fail)", file=sys.stderr)
        return 3
    samples = args.samples or (64 if args.dummy else 5000)
    if samples < 8:
        parser.error("--samples must be at least 8")

    started = time.time()
    rows, targets = make_data(samples, args.noise, args.seed)
    split = int(samples * 0.8)
    weights, bias = fit(rows[:split], targets[:split])
    model = {
        "kind": "linear",
        "weights": weights,
        "bias": bias,
        "params": {
            "model": "linear-least-squares",
            "samples": samples,
            "features": len(TRUE_WEIGHTS),
            "noise": args.noise,
            "seed": args.seed,
            "dummy": args.dummy,
        },
        "metrics": {},
        "trained_on": platform.node(),
    }
    train_scores = scores(model, rows[:split], targets[:split])
    test_scores = scores(model, rows[split:], targets[split:])
    model["metrics"] = {
        "train_mse": train_scores["mse"],
        "test_mse": test_scores["mse"],
        "test_r2": test_scores["r2"],
        "train_seconds": time.time() - started,
    }

    temporary = f"{args.output}.tmp{os.getpid()}"
    with open(temporary, "wb") as handle:
        pickle.dump(model, handle, protocol=4)
    os.replace(temporary, args.output)  # never a half-written model
    print(
        f"train.py: {samples} samples, weights {[round(w, 3) for w in weights]}, "
        f"bias {bias:.3f}, test mse {test_scores['mse']:.5f}"
    )
    print(f"train.py: wrote {os.path.abspath(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
