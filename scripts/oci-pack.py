#!/usr/bin/python3
"""scripts/oci-pack.py ROOT OUT NAME:TAG: a root folder as a one-layer OCI
image archive (the oci-archive format `podman load` and `docker load`
take; `skopeo` calls it oci-archive too), with Python's standard library
only: no registry, no daemon, no builder.

The layer is the root as a tar (numeric owners as they are, entries
sorted, every mtime set to SOURCE_DATE_EPOCH or 0, no atime: the same
root gives the same layer digest), gzipped. The image config is what
scripts/make-image says: a non-root user, agentz as the entrypoint, the
workspace in the state volume as the working directory, the stop signal;
every time is SOURCE_DATE_EPOCH's.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time

UID = 1000
STATE = "/var/lib/agentz"


def layer(root):
    """The root as an uncompressed tar, in bytes (sorted, mtimes fixed)."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        def add(rel):
            path = os.path.join(root, rel) if rel else root
            info = t.gettarinfo(path, arcname=rel or ".")
            info.mtime = epoch
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
            if info.isdir():
                for name in sorted(os.listdir(path)):
                    add(os.path.join(rel, name) if rel else name)
        add("")
    return buf.getvalue()


def blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    out.append(("blobs/sha256/" + digest, data))
    return "sha256:" + digest, len(data)


def created():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def config(diff_id, version):
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created(),
        "config": {
            "User": "%d:%d" % (UID, UID),
            "Entrypoint": ["/usr/local/bin/agentz"],
            "Cmd": ["--help"],
            "WorkingDir": STATE + "/workspace",
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin",
                    "LANG=C.UTF-8"],
            "Volumes": {STATE: {}},
            "StopSignal": "SIGTERM",
            "Labels": {
                "org.opencontainers.image.title": "agentz",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.description":
                    "agentz: model-driven Python cells under a C "
                    "supervisor (docs/deploying.md)",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created(),
                     "created_by": "scripts/make-image"}],
    }


def main():
    if len(sys.argv) != 4 or ":" not in sys.argv[3]:
        sys.exit("usage: oci-pack.py ROOT OUT NAME:TAG")
    root, out_path, ref = sys.argv[1:]
    version = ref.rsplit(":", 1)[1]
    files = []
    raw = layer(root)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    gz = gzip.compress(raw, compresslevel=6, mtime=0)
    layer_digest, layer_size = blob(files, gz)
    cfg = json.dumps(config(diff_id, version), sort_keys=True).encode()
    cfg_digest, cfg_size = blob(files, cfg)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": cfg_digest, "size": cfg_size},
        "layers": [{"mediaType":
                    "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest, "size": layer_size}],
    }, sort_keys=True).encode()
    man_digest, man_size = blob(files, manifest)
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": man_digest, "size": man_size,
            "annotations": {"org.opencontainers.image.ref.name": ref}}],
    }, sort_keys=True).encode()
    files.append(("index.json", index))
    files.append(("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'))
    tmp = out_path + ".part"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            t.addfile(info)
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    os.replace(tmp, out_path)
    print("%s: %s, layer %.1f MiB gzipped (%.1f MiB unpacked), %s" % (
        out_path, ref, layer_size / 2**20, len(raw) / 2**20, man_digest))


if __name__ == "__main__":
    main()
