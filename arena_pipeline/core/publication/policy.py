"""The gate's policies (how much a new board may shrink), declared once: the gate, its run config and the CLI's flags read them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def _policy(default: float | bool, help: str) -> float | bool:  # noqa: A002 - the option's help text
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class GatePolicy:
    """How much a new leaderboard may shrink against the live one before the gate refuses it (publication
    rules 12, 13 and 15). Each field is a key of the ``publication_gate`` run configuration and a flag of
    ``arena-pipeline refresh`` / ``rerank`` (``--max-category-drop``), its help the field's ``help``."""

    allow_degenerate: bool = _policy(
        False, "publish even an empty overall board or one that lost many models/categories")
    max_model_drop: float = _policy(0.5, "largest share of the live overall board's models that may disappear")
    max_category_drop: float = _policy(0.5, "largest share of the live categories that may lose their board")

    def __post_init__(self) -> None:
        for name in ("max_model_drop", "max_category_drop"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a share between 0 and 1, got {value!r}")


def policy_fields() -> dict[str, tuple[type, float | bool, str]]:
    """Each policy's name, type (``bool`` or ``float``), default and help, in declaration order."""
    return {f.name: (bool if isinstance(f.default, bool) else float, f.default, f.metadata["help"])
            for f in fields(GatePolicy)}
