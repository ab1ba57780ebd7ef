#!/usr/bin/env python3
"""The mnist_softmax sample against NumPy on the real Fashion-MNIST.

The sample is the tutorial's softmax regression (W, b from zeros, mean sparse softmax
cross-entropy, plain gradient descent, batches of 100 in file order). NumPy computes the same
regression in float32 from the same files, independently of anything in xlens; the sample's loss
curve, op by op and with the JIT, must follow NumPy's, and its test accuracy must be NumPy's.
A learning rate of 0.1 keeps the three runs on one trajectory (at the tutorial's 0.5, float
rounding differences grow until the curves part, so only their accuracies can be compared).

Exit 77 (a skip) when NumPy or the data set is absent, saying which.
"""
import argparse
import gzip
import os
import re
import subprocess
import sys

STEPS, BATCH, RATE, LOG_EVERY = 600, 100, 0.1, 50


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def read_idx(path, header):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    return data[header:], int.from_bytes(data[4:8], "big")


def load(np, data_dir):
    names = os.listdir(data_dir)

    def find(stem):
        for n in names:
            if n.startswith(stem):
                return os.path.join(data_dir, n)
        skip(f"{data_dir} has no {stem}* file")

    def images(stem):
        raw, n = read_idx(find(stem), 16)
        # As the sample (and NumPy's images_u8 / 255 fed to a float32 placeholder): divided in
        # double, then rounded to float32.
        return (np.frombuffer(raw, np.uint8).reshape(n, 784).astype(np.float64) / 255.0).astype(np.float32)

    def labels(stem):
        raw, _ = read_idx(find(stem), 8)
        return np.frombuffer(raw, np.uint8).astype(np.int64)

    return images("train-images"), labels("train-labels"), images("t10k-images"), labels("t10k-labels")


def numpy_run(np, x_train, y_train, x_test, y_test):
    w = np.zeros((784, 10), np.float32)
    b = np.zeros(10, np.float32)
    losses = {}
    count = x_train.shape[0]
    for step in range(STEPS):
        first = (step * BATCH) % count
        index = np.arange(first, first + BATCH) % count
        x, y = x_train[index], y_train[index]
        logits = x @ w + b
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        total = exp.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(total[:, 0]) - shifted[np.arange(BATCH), y]))
        if (step + 1) % LOG_EVERY == 0 or step == 0:
            losses[step + 1] = loss
        grad = exp / total
        grad[np.arange(BATCH), y] -= 1
        grad /= np.float32(BATCH)
        w -= np.float32(RATE) * (x.T @ grad)
        b -= np.float32(RATE) * grad.sum(axis=0)
    accuracy = float(np.mean((x_test @ w + b).argmax(axis=1) == y_test))
    return losses, accuracy


def sample_run(binary, data_dir, jit):
    cmd = [binary, f"--jit={jit}", "--data", data_dir, "--steps", str(STEPS), "--learning-rate",
           str(RATE), "--log-every", str(LOG_EVERY)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
        sys.exit(1)
    losses = {int(s): float(l) for s, l in re.findall(r"^step (\d+): loss (\S+)$", out.stdout, re.M)}
    accuracy = re.search(r"^test accuracy: (\S+)$", out.stdout, re.M)
    if not accuracy:
        print(f"FAIL: no test accuracy in the output of {' '.join(cmd)}:\n{out.stdout}")
        sys.exit(1)
    return losses, float(accuracy.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample", required=True, help="build/samples/mnist_softmax")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    try:
        import numpy as np
    except ImportError:
        skip("NumPy is not installed (scripts/setup.sh --test-peers installs it)")
    if not os.path.isdir(args.data):
        skip(f"no Fashion-MNIST at {args.data} (Debian's dataset-fashion-mnist; scripts/setup.sh installs it)")
    expected_losses, expected_accuracy = numpy_run(np, *load(np, args.data))
    failed = False
    for jit in ("off", "auto"):
        losses, accuracy = sample_run(args.sample, args.data, jit)
        for step, expected in sorted(expected_losses.items()):
            got = losses.get(step)
            if got is None or abs(got - expected) > 1e-4 * abs(expected):
                print(f"FAIL: --jit={jit} step {step}: loss {got}, NumPy {expected:.7g}")
                failed = True
        # A handful of the 10,000 test images sit on a tie that float rounding can tip.
        if abs(accuracy - expected_accuracy) > 0.002:
            print(f"FAIL: --jit={jit}: test accuracy {accuracy}, NumPy {expected_accuracy}")
            failed = True
        print(f"--jit={jit}: loss at step {STEPS} {losses.get(STEPS)} (NumPy {expected_losses[STEPS]:.7g}), "
              f"test accuracy {accuracy} (NumPy {expected_accuracy})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
