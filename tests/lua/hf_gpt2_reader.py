"""An independent reader of an exported GPT-2 (Python standard library only, no llmlab code):
parses model.safetensors from the format's spec (8-byte little-endian header length, JSON
header, raw little-endian data), checks every entry's offsets, and runs GPT-2's forward pass
as Hugging Face's GPT2LMHeadModel defines it (Conv1D: y = x W + b with W stored [in, out];
gelu_new; LayerNorm with the config's epsilon; tied head when there is no lm_head.weight).
Prints JSON: {"logits": [[...] per position], "tensors": {name: {"shape": [...], "values": [...]}}}.
    /usr/bin/python3 hf_gpt2_reader.py DIR ID ID ID ...
"""
import json
import math
import struct
import sys

SIZES = {"F32": (4, "f"), "F64": (8, "d"), "I32": (4, "i"), "I64": (8, "q")}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), "header longer than the file"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    tensors, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
        if name == "__metadata__":
            continue
        size, code = SIZES[e["dtype"]]
        begin, stop = e["data_offsets"]
        assert begin == end, "offsets leave a hole or overlap at " + name
        count = 1
        for d in e["shape"]:
            count *= d
        assert stop - begin == count * size, "size mismatch for " + name
        tensors[name] = (e["shape"], list(struct.unpack("<%d%s" % (count, code), body[begin:stop])))
        end = stop
    assert end == len(body), "bytes after the last tensor"
    return tensors


def matrix(t):
    shape, v = t
    rows, cols = shape
    return [v[i * cols:(i + 1) * cols] for i in range(rows)]


def conv1d(x, w, b):  # x [T, in], w [in, out]
    W = matrix(w)
    out = []
    for row in x:
        y = list(b[1])
        for i, xi in enumerate(row):
            wi = W[i]
            for j in range(len(y)):
                y[j] += xi * wi[j]
        out.append(y)
    return out


def layer_norm(x, w, b, eps):
    out = []
    for row in x:
        mu = sum(row) / len(row)
        var = sum((a - mu) ** 2 for a in row) / len(row)
        s = 1.0 / math.sqrt(var + eps)
        out.append([(a - mu) * s * w[1][j] + b[1][j] for j, a in enumerate(row)])
    return out


def gelu_new(a):
    return 0.5 * a * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))


def main():
    d = sys.argv[1]
    ids = [int(a) for a in sys.argv[2:]]
    cfg = json.load(open(d + "/config.json"))
    t = read_safetensors(d + "/model.safetensors")
    g = lambda name: t["transformer." + name]
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    wte, wpe = matrix(g("wte.weight")), matrix(g("wpe.weight"))
    x = [[wte[i][j] + wpe[p][j] for j in range(C)] for p, i in enumerate(ids)]
    T, hd = len(ids), C // H
    for layer in range(cfg["n_layer"]):
        h = lambda n: g("h.%d.%s" % (layer, n))
        a = layer_norm(x, h("ln_1.weight"), h("ln_1.bias"), eps)
        qkv = conv1d(a, h("attn.c_attn.weight"), h("attn.c_attn.bias"))
        y = [[0.0] * C for _ in range(T)]
        for head in range(H):
            q = [r[head * hd:(head + 1) * hd] for r in qkv]
            k = [r[C + head * hd:C + (head + 1) * hd] for r in qkv]
            v = [r[2 * C + head * hd:2 * C + (head + 1) * hd] for r in qkv]
            for i in range(T):
                s = [sum(q[i][c] * k[j][c] for c in range(hd)) / math.sqrt(hd) for j in range(i + 1)]
                m = max(s)
                e = [math.exp(z - m) for z in s]
                z = sum(e)
                for c in range(hd):
                    y[i][head * hd + c] = sum(e[j] * v[j][c] for j in range(i + 1)) / z
        y = conv1d(y, h("attn.c_proj.weight"), h("attn.c_proj.bias"))
        x = [[x[i][j] + y[i][j] for j in range(C)] for i in range(T)]
        a = layer_norm(x, h("ln_2.weight"), h("ln_2.bias"), eps)
        f = [[gelu_new(z) for z in row] for row in conv1d(a, h("mlp.c_fc.weight"), h("mlp.c_fc.bias"))]
        y = conv1d(f, h("mlp.c_proj.weight"), h("mlp.c_proj.bias"))
        x = [[x[i][j] + y[i][j] for j in range(C)] for i in range(T)]
    x = layer_norm(x, g("ln_f.weight"), g("ln_f.bias"), eps)
    head = matrix(t["lm_head.weight"]) if "lm_head.weight" in t else wte  # [vocab, C], a Linear
    logits = [[sum(r[c] * w[c] for c in range(C)) for w in head] for r in x]
    print(json.dumps({"logits": logits, "tensors": {n: {"shape": s, "values": v} for n, (s, v) in t.items()}}))


main()
