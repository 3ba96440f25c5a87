#!/usr/bin/env python3
"""An outside verifier of an hcp audit trail, written from docs/DESIGN.md ("The keyed
chain") alone: it shares no code with hcp.

    verify_trail.py AUDIT_DIR [--checkpoint FILE] [--boot BOOT_ID]

AUDIT_DIR is a store's `audit/` (it reads `chain.key`, `audit.jsonl`, `audit.anchor`).
Prints one JSON object: {"ok", "records", "fault", "line", "detail", "interrupted",
"interrupted_acts", "keyed_from", "checkpoint"}; exits 0 when the trail is sound, 1 when it is not, 2 on a
usage error. The checkpoint's Ed25519 signature is checked with the `cryptography`
package when it is installed (else "signature": "not_checked").
"""

import hashlib
import hmac
import json
import os
import sys

GENESIS = "sha256:" + "0" * 64
KEYED = "hmac-sha256:"
ANCHOR_TAG = b"hcp-audit-anchor/2\n"
SLOT = 512


def canonical(value):
    """C(v): no whitespace, keys sorted by their UTF-8 bytes, minimal escapes."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8"))
        return "{" + ",".join(canonical(k) + ":" + canonical(v) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, str):
        out = ['"']
        for ch in value:
            o = ord(ch)
            if ch == '"':
                out.append('\\"')
            elif ch == "\\":
                out.append("\\\\")
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\r":
                out.append("\\r")
            elif ch == "\b":
                out.append("\\b")
            elif ch == "\f":
                out.append("\\f")
            elif o < 0x20:
                out.append("\\u%04x" % o)
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    raise ValueError("a record holds a number that is not an integer")


def record_hash(record, key):
    m = {k: v for k, v in record.items() if k != "hash"}
    body = canonical(m).encode("utf-8")
    if record["hash"].startswith(KEYED):
        if key is None:
            return None
        return KEYED + hmac.new(key, body, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(body).hexdigest()


class Broken(Exception):
    def __init__(self, fault, line, detail):
        super().__init__(detail)
        self.fault, self.line, self.detail = fault, line, detail


def read_anchor(path, key):
    """The anchor (the slot with the higher generation; both must hold)."""
    with open(path, "rb") as f:
        data = f.read()
    slots = []
    for j in range(2):
        raw = data[j * SLOT:(j + 1) * SLOT]
        if b"\t" not in raw:
            return None, "slot %d has no MAC" % j
        body, rest = raw.split(b"\t", 1)
        mac = rest[:64].decode("ascii", "replace")
        want = hmac.new(key, ANCHOR_TAG + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, want):
            return None, "slot %d's MAC does not hold" % j
        slot = json.loads(body)
        if slot.get("v") != 2:
            return None, "slot %d is not of format 2" % j
        slots.append(slot)
    return max(slots, key=lambda s: s["generation"]), None


def current_boot():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def verify(audit_dir, checkpoint=None, boot=None):
    key_path = os.path.join(audit_dir, "chain.key")
    key = open(key_path, "rb").read() if os.path.exists(key_path) else None
    report = {"ok": True, "records": 0, "fault": None, "line": None, "detail": None,
              "interrupted": [], "keyed_from": None, "checkpoint": None}
    hashes = []   # hash of record i at index i-1
    ends = []     # byte offset after record i
    log_path = os.path.join(audit_dir, "audit.jsonl")
    anchor_path = os.path.join(audit_dir, "audit.anchor")
    try:
        if not os.path.exists(log_path):
            if key is not None:
                raise Broken("missing_log", 1, "the trail is gone while the store has its keys")
            return report
        data = open(log_path, "rb").read()
        lines = data.split(b"\n")
        torn = lines.pop()  # bytes after the last newline: a torn tail, or empty
        report["torn_tail"] = len(torn) or None
        prev, keyed_from, opened, offset = GENESIS, None, {}, 0
        acts_open = {}  # seq of an act's intent -> its line
        for i, raw in enumerate(lines, start=1):
            offset += len(raw) + 1
            try:
                rec = json.loads(raw)
            except ValueError as e:
                raise Broken("unparseable", i, str(e))
            if not isinstance(rec, dict) or not isinstance(rec.get("hash"), str) \
                    or not isinstance(rec.get("prev"), str):
                raise Broken("unparseable", i, "not a record with `hash` and `prev`")
            h = rec["hash"]
            if h.startswith(KEYED):
                if keyed_from is None:
                    opens = rec.get("kind") == "authority" and (
                        rec.get("act") == "migrate" or (rec.get("act") == "init" and i == 1))
                    if not opens:
                        raise Broken("hash_mismatch", i, "the keyed part does not begin with init or migrate")
                    keyed_from = i
            elif h.startswith("sha256:"):
                if keyed_from is not None:
                    raise Broken("hash_mismatch", i, "a plain record after the keyed part")
            else:
                raise Broken("hash_mismatch", i, "an unknown hash")
            want = record_hash(rec, key)
            if want is not None and not hmac.compare_digest(want, h):
                raise Broken("hash_mismatch", i, "its hash does not hold")
            if rec["prev"] != prev:
                raise Broken("prev_mismatch", i, "its prev is not the previous record's hash")
            if "seq" in rec and rec["seq"] != i:
                raise Broken("seq_mismatch", i, "its seq is not its position")
            if rec.get("kind") == "intent":
                opened[rec["id"]] = i
            elif rec.get("kind") == "outcome":
                if opened.pop(rec.get("intent"), None) is None:
                    raise Broken("orphan_outcome", i, "an outcome of no open intent")
            elif rec.get("kind") == "authority":
                # An act's intent (`phase: intent`) is open until an `act made` or an
                # `act failed` names its seq; an `act made` of no open act is an orphan.
                changed = rec.get("changed")
                of = changed.get("seq") if isinstance(changed, dict) else None
                if rec.get("phase") == "intent":
                    acts_open[rec.get("seq", i)] = i
                elif rec.get("act") == "act made":
                    if acts_open.pop(of, None) is None:
                        raise Broken("orphan_outcome", i, "an act made of no open act")
                elif rec.get("act") == "act failed":
                    acts_open.pop(of, None)
            prev = h
            hashes.append(h)
            ends.append(offset)
            report["records"] = i
        report["keyed_from"] = keyed_from
        report["interrupted"] = sorted(opened.values())
        report["interrupted_acts"] = sorted(acts_open.values())
        n = report["records"]
        if key is not None:
            if not os.path.exists(anchor_path):
                raise Broken("missing_anchor", n + 1, "the anchor is gone")
            anchor, why = read_anchor(anchor_path, key)
            if anchor is None:
                raise Broken("anchor_mismatch", n + 1, why)
            point = anchor["point"] if anchor["boot"] == (boot or current_boot()) else anchor["durable"]
            if point["count"] > n:
                raise Broken("truncated", n + 1, "the anchor names %d records" % point["count"])
            c = point["count"]
            if c > 0 and (hashes[c - 1] != point["head"] or ends[c - 1] != point["end"]):
                raise Broken("anchor_mismatch", c, "the anchor names another record here")
        if checkpoint is not None:
            cp = json.load(open(checkpoint))
            report["checkpoint"] = cp["count"]
            report["signature"] = check_signature(cp)
            if report["signature"] == "forged":
                raise Broken("bad_checkpoint", 0, "its signature does not hold")
            if cp["count"] > n:
                raise Broken("rollback", n + 1, "the trail holds fewer records than the checkpoint")
            if cp["count"] > 0 and hashes[cp["count"] - 1] != cp["head"]:
                raise Broken("checkpoint_mismatch", cp["count"], "another record where the checkpoint's is")
    except Broken as b:
        report.update(ok=False, fault=b.fault, line=b.line, detail=b.detail)
    return report


def check_signature(cp):
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        return "not_checked"
    body = {k: v for k, v in cp.items() if k != "signature"}
    pub = Ed25519PublicKey.from_public_bytes(bytes.fromhex(cp["key"][len("ed25519:"):]))
    try:
        pub.verify(bytes.fromhex(cp["signature"]), canonical(body).encode("utf-8"))
        return "checked"
    except InvalidSignature:
        return "forged"


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    audit_dir, checkpoint, boot = argv[1], None, None
    rest = argv[2:]
    while rest:
        flag = rest.pop(0)
        if flag == "--checkpoint" and rest:
            checkpoint = rest.pop(0)
        elif flag == "--boot" and rest:
            boot = rest.pop(0)
        else:
            print("unknown argument %r" % flag, file=sys.stderr)
            return 2
    report = verify(audit_dir, checkpoint, boot)
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
