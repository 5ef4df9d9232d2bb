"""The ``ARENA_*`` variables the resources read (from their fields), and the misspelt ones an environment holds."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

import dagster as dg

#: A resource field read from an environment variable says so first in its description: ``"ARENA_SOURCE: ..."``.
VARIABLE = re.compile(r"^((?:ARENA|HF)_[A-Z_]+): ")
#: The prefix of this project's own variables (``HF_*`` are the Hub's, shared with other tools).
PREFIX = "ARENA_"


def field_variable(description: str | None) -> str | None:
    """The variable a resource field's description names first (``ARENA_SOURCE: ...``), or None."""
    found = VARIABLE.match(description or "")
    return found.group(1) if found else None


def resource_variables(resources: Iterable[type[dg.ConfigurableResource]]) -> dict[str, str]:
    """Each variable the resources' fields read, and the field (``DumpSource.source``)."""
    return {variable: f"{cls.__name__}.{name}" for cls in resources for name, info in cls.model_fields.items()
            if (variable := field_variable(info.description))}


def known_variables() -> dict[str, str]:
    """The variables the pipeline's resources (the resource classes of :mod:`arena_pipeline.resources`)
    read, with their fields."""
    from arena_pipeline import resources

    return resource_variables(kind for kind in vars(resources).values()
                              if isinstance(kind, type) and issubclass(kind, dg.ConfigurableResource)
                              and kind.__module__ == resources.__name__)


def unknown_variables(environ: Mapping[str, str], known: Iterable[str]) -> dict[str, str | None]:
    """The ``ARENA_*`` variables of ``environ`` that no resource reads, each with the known one it is
    closest to (a typo: ``ARENA_SOUCE`` -> ``ARENA_SOURCE``), or None when none is close."""
    known = sorted(set(known))
    return {name: next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.8)), None)
            for name in sorted(environ) if name.startswith(PREFIX) and name not in known}


def environment_warnings(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every unknown ``ARENA_*`` variable of ``environ`` (the process's, read now) in a line each: what the
    refresh's first step logs as warnings, so a run started by `dagster dev` (its ``.env``) says it too."""
    import os

    refusals, notes = typo_lines(os.environ if environ is None else environ, known_variables())
    return [line.removeprefix("note: ") for line in refusals + notes]


def typo_lines(environ: Mapping[str, str], known: Iterable[str]) -> tuple[list[str], list[str]]:
    """(refusals, notes) for the unknown ``ARENA_*`` variables of ``environ``: a misspelling of a variable
    that is itself unset is a refusal (the run would silently use that setting's default, say the Hub
    instead of the local dump meant); any other unknown variable is a note that it is ignored."""
    refusals, notes = [], []
    for name, close in unknown_variables(environ, known).items():
        if close is not None and not environ.get(close):
            refusals.append(f"{name} is set, but arena_pipeline reads no such variable: did you mean {close}? "
                            f"({close} is unset, so its default would be used)")
        elif close is not None:
            notes.append(f"note: {name} is ignored (did you mean {close}? it is set too)")
        else:
            notes.append(f"note: {name} is ignored: arena_pipeline reads no such variable "
                         "(docs/reference/configuration.md lists them)")
    return refusals, notes
