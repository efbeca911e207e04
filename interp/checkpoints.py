"""Tensor files of a run: checkpoints and the resume state, as safetensors (never pickle).

Files are byte-for-byte reproducible: the header is written with sorted keys and no spaces
(safetensors' own writer orders metadata keys differently from one call to the next), so
identical weights give identical files and identical hashes. The resume state carries a
SHA-256 of its own header and data in its metadata, so a damaged file is refused instead of
resuming silently from wrong weights, and the identity of its run (spec hash, seed, step and the
SHA-256 of the checkpoint at that step), so another run's state is refused too (the run checks
it: `interp.runs.Run.load_resume`); checkpoints are checked against the manifest's hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor, nn

from interp.errors import InterpError
from interp.files import sha256_bytes

SELF_HASH_KEY = "content_sha256"
IDENTITY_KEY = "run_identity"
IDENTITY_FIELDS = ("spec_sha256", "seed", "step", "checkpoint_sha256")


def _canonical(header: dict) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def _split(data: bytes, path: Path) -> tuple[dict, bytes]:
    """(header, data section) of a safetensors file, or an InterpError naming `path`."""
    try:
        if len(data) < 8:
            raise ValueError(f"{len(data)} bytes is too short")
        n = int.from_bytes(data[:8], "little")
        if n > len(data) - 8:
            raise ValueError("the header runs past the end of the file")
        header = json.loads(data[8 : 8 + n])
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InterpError(f"{path} is not a readable safetensors file ({exc})") from None
    return header, data[8 + n :]


def serialize(tensors: dict[str, Tensor], metadata: dict[str, str], self_hash: bool = False) -> bytes:
    """safetensors bytes with a canonical header; with `self_hash`, a content hash in the metadata."""
    raw = st_save(tensors, metadata=metadata)
    header, body = _split(raw, Path("<memory>"))
    header.setdefault("__metadata__", {})
    if self_hash:
        header["__metadata__"][SELF_HASH_KEY] = sha256_bytes(_canonical(header) + body)
    blob = _canonical(header)
    blob += b" " * (-len(blob) % 8)  # keep the data section 8-byte aligned, as safetensors does
    return len(blob).to_bytes(8, "little") + blob + body


def read(path: Path, expected_sha: str | None = None, self_hashed: bool = False
         ) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Tensors and metadata of `path`, verified against `expected_sha` and its own content hash
    (which `self_hashed` requires to be present)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InterpError(f"missing file {path}") from None
    if expected_sha is not None and sha256_bytes(data) != expected_sha:
        raise InterpError(
            f"{path} is corrupt or truncated: its SHA-256 does not match the manifest "
            f"({len(data)} bytes on disk); the other checkpoints of the run are unaffected"
        )
    header, body = _split(data, path)
    meta = dict(header.get("__metadata__") or {})
    if self_hashed and SELF_HASH_KEY not in meta:
        raise InterpError(f"{path} carries no content hash, so it cannot be checked (it was written by an "
                          f"older interp); it cannot be resumed bit-exactly")
    if SELF_HASH_KEY in meta:
        claimed = meta.pop(SELF_HASH_KEY)
        unhashed = {**header, "__metadata__": meta}
        if sha256_bytes(_canonical(unhashed) + body) != claimed:
            raise InterpError(f"{path} is corrupt: its content does not match the hash it was written with")
    try:
        tensors = st_load(data)
    except SafetensorError as exc:
        raise InterpError(f"{path} is not a readable safetensors file: {exc}") from None
    return tensors, meta


def checkpoint_bytes(model: nn.Module, step: int, dtype: str) -> bytes:
    """A checkpoint: the model's parameters only, in `dtype`."""
    from interp.model import tl_params

    kind = getattr(torch, dtype)
    params = {name: p.detach().cpu().to(kind).contiguous() for name, p in tl_params(model).items()}
    return serialize(params, {"step": str(step), "format": "interp-checkpoint-1"})


@dataclass
class ResumeState:
    step: int
    params: dict[str, Tensor]
    optimizer: dict
    generators: dict[str, Tensor]
    extra: dict
    identity: dict | None = None  # IDENTITY_FIELDS of the run it belongs to; None: written by an older interp


def weights_match(params: dict[str, Tensor], checkpoint: bytes) -> bool:
    """Whether `params` (float32, from a resume state) are the checkpoint's weights, compared in
    the checkpoint's dtype: how a resume state without a recorded identity is tied to its run."""
    saved = st_load(checkpoint)
    return saved.keys() == params.keys() and all(
        torch.equal(params[name].to(saved[name].dtype), saved[name]) for name in saved)


def resume_bytes(step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                 generators: dict[str, torch.Generator], extra: dict, identity: dict) -> bytes:
    """Everything needed to continue bit-exactly from `step` (float32 parameters, AdamW, RNG),
    with `identity` (IDENTITY_FIELDS: which run and checkpoint it continues) in the hashed metadata."""
    from interp.model import tl_optimizer_state, tl_params

    opt = tl_optimizer_state(model, optimizer.state_dict())  # checkpoint order and shapes on either TransformerLens
    return state_bytes(step, tl_params(model), opt, {name: gen.get_state() for name, gen in generators.items()},
                       extra, identity)


def state_bytes(step: int, params: dict[str, Tensor], optimizer: dict, generators: dict[str, Tensor], extra: dict,
                identity: dict) -> bytes:
    """A resume state's file from its parts (checkpoint-layout parameters, AdamW's state dict in checkpoint order,
    the generators' states): what `read_resume` reads back."""
    if set(identity) != set(IDENTITY_FIELDS) or identity["step"] != step:
        raise ValueError(f"a resume identity needs exactly {IDENTITY_FIELDS} for step {step}, got {identity}")
    tensors = {f"param.{n}": p.detach().cpu().contiguous() for n, p in params.items()}
    for idx, state in optimizer["state"].items():
        for key, value in state.items():
            tensors[f"opt.{idx}.{key}"] = value.detach().cpu().contiguous()
    for name, gen in generators.items():
        tensors[f"rng.{name}"] = gen
    meta = {"step": str(step), "param_groups": json.dumps(optimizer["param_groups"], sort_keys=True),
            "extra": json.dumps(extra, sort_keys=True), IDENTITY_KEY: json.dumps(identity, sort_keys=True)}
    return serialize(tensors, meta, self_hash=True)


def read_resume(path: Path) -> ResumeState:
    tensors, meta = read(path, self_hashed=True)
    params, generators, opt_state = {}, {}, {}
    for key, value in tensors.items():
        kind, _, rest = key.partition(".")
        if kind == "param":
            params[rest] = value
        elif kind == "rng":
            generators[rest] = value
        elif kind == "opt":
            idx, _, field = rest.partition(".")
            opt_state.setdefault(int(idx), {})[field] = value
    try:
        optimizer = {"state": opt_state, "param_groups": json.loads(meta["param_groups"])}
        identity = json.loads(meta[IDENTITY_KEY]) if IDENTITY_KEY in meta else None
        if identity is not None and not isinstance(identity, dict):
            raise ValueError(f"{IDENTITY_KEY} is not a JSON object")
        return ResumeState(int(meta["step"]), params, optimizer, generators, json.loads(meta["extra"]), identity)
    except (KeyError, ValueError) as exc:
        raise InterpError(f"{path} lacks part of the resume state ({exc})") from None


def load_params(model: nn.Module, params: dict[str, Tensor]) -> None:
    """Copy saved parameters into `model`, refusing any mismatch of names or shapes."""
    from interp.model import is_bridge, load_tl_params

    if is_bridge(model):  # TransformerLens 4: converted to the bridge's layout
        return load_tl_params(model, params)
    own = dict(model.named_parameters())
    missing, extra = sorted(set(own) - set(params)), sorted(set(params) - set(own))
    if missing or extra:
        raise InterpError(f"checkpoint does not fit the model: missing {missing[:3]}, unexpected {extra[:3]}")
    with torch.no_grad():
        for name, p in own.items():
            if p.shape != params[name].shape:
                raise InterpError(
                    f"checkpoint parameter {name} has shape {tuple(params[name].shape)}, "
                    f"the model expects {tuple(p.shape)}"
                )
            p.copy_(params[name])
