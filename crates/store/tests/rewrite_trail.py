#!/usr/bin/env python3
"""The rewrite of an audit trail by someone without the store's chain key (the attack of
issue 26, which passed before keyed chains): delete a call (its intent and outcome) from
the middle, change the principal of the first record that names one, then recompute every
`seq`, `prev` and `hash` and both anchor slots.

    rewrite_trail.py AUDIT_DIR sha256|guessed-key

`sha256`: plain SHA-256 hashes and an FNV-checked anchor, as the trail was before keyed
chains. `guessed-key`: the keyed format exactly, under a key of the attacker's own.
"""

import hashlib
import hmac
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify_trail import GENESIS, KEYED, ANCHOR_TAG, SLOT, canonical, current_boot  # noqa: E402


def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def main(audit_dir, mode):
    log_path = os.path.join(audit_dir, "audit.jsonl")
    records = [json.loads(l) for l in open(log_path, "rb").read().split(b"\n") if l]
    intents = [i for i, r in enumerate(records) if r.get("kind") == "intent"]
    victim = records[intents[len(intents) // 2]]["id"]
    records = [r for r in records if r.get("id") != victim and r.get("intent") != victim]
    for r in records:
        if "principal" in r:
            r["principal"] = "someone-else"
            break
    key = os.urandom(32)
    prev, out = GENESIS, b""
    for seq, r in enumerate(records, start=1):
        r.pop("hash", None)
        r["seq"], r["prev"] = seq, prev
        body = canonical(r).encode("utf-8")
        if mode == "sha256":
            r["hash"] = "sha256:" + hashlib.sha256(body).hexdigest()
        else:
            r["hash"] = KEYED + hmac.new(key, body, hashlib.sha256).hexdigest()
        prev = r["hash"]
        out += canonical(r).encode("utf-8") + b"\n"
    with open(log_path, "wb") as f:
        f.write(out)
    point = {"count": len(records), "head": prev, "end": len(out)}
    v = 1 if mode == "sha256" else 2
    slot = json.dumps({"v": v, "generation": 99, "boot": current_boot(), "point": point,
                       "durable": point}, separators=(",", ":")).encode("utf-8")
    if mode == "sha256":
        mac = fnv(slot).encode("ascii")
    else:
        mac = hmac.new(key, ANCHOR_TAG + slot, hashlib.sha256).hexdigest().encode("ascii")
    line = (slot + b"\t" + mac).ljust(SLOT - 1, b" ") + b"\n"
    with open(os.path.join(audit_dir, "audit.anchor"), "wb") as f:
        f.write(line + line)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
