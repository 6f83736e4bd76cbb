"""The text corpus of B7: 8 files of words with a Zipf-like frequency, about
N megabytes in all, made once (deterministic) under bench/.data/ and reused.
Beside the files, expected.json holds the answers both sides must give: the
count of the most frequent word when lines are split on whitespace
(`str.split()`) and when split on single spaces (`l.split(" ")`, where the
last word of a line keeps its newline).

    python3 bench/text_data.py 200      # prints the directory
"""
import collections
import json
import os
import random
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
FILES = 8


def ensure(mb):
    d = os.path.join(BENCH, ".data", f"words-{mb}mb")
    done = os.path.join(d, "expected.json")
    if os.path.exists(done):
        return d
    os.makedirs(d, exist_ok=True)
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(12000)})
    rng.shuffle(vocab)
    vocab = vocab[:10000]
    weights = [1.0 / (i + 1) ** 1.1 for i in range(len(vocab))]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    ws = collections.Counter()
    sp = collections.Counter()
    per_file = mb * 1_000_000 // FILES
    for f in range(FILES):
        out, size = [], 0
        while size < per_file:
            words = rng.choices(vocab, cum_weights=cum, k=4000)
            pos = 0
            lines = []
            while pos < len(words):
                k = rng.randint(3, 14)
                line = words[pos:pos + k]
                pos += k
                if not line:
                    break
                ws.update(line)
                sp.update(line[:-1])
                sp[line[-1] + "\n"] += 1
                lines.append(" ".join(line) + "\n")
            chunk = "".join(lines)
            out.append(chunk)
            size += len(chunk)
        with open(os.path.join(d, f"part{f}.txt"), "w") as fh:
            fh.write("".join(out))
    with open(done, "w") as fh:
        json.dump({"top_whitespace": ws.most_common(1)[0][1], "top_space": sp.most_common(1)[0][1],
                   "words": sum(ws.values()), "distinct": len(ws)}, fh)
    return d


def expected(mb, key):
    with open(os.path.join(ensure(mb), "expected.json")) as fh:
        return json.load(fh)[key]


if __name__ == "__main__":
    print(ensure(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
