"""The search scaffold's tool: `lookup`, one fact about one entity of the generated world.

Errors name what would have worked (close entity names, the fields an entity has), so a policy that misspells a
name or asks the wrong field can recover on its next turn.
"""

import difflib

from agentrl.scaffolds.search.world import FIELDS, Field, world

from agentrl.tool import tool


def _resolve(entity: str) -> str:
    """The canonical name for `entity` (case and surrounding spaces ignored)."""
    by_lower = {name.lower(): name for name in world().entities}
    key = " ".join(entity.split()).lower()
    if key in by_lower:
        return by_lower[key]
    close = difflib.get_close_matches(key, by_lower, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(by_lower[c] for c in close)}?" if close else ""
    raise ValueError(f"unknown entity {entity!r}{hint}")


@tool
def lookup(entity: str, field: Field) -> str:
    """Look up one fact about a company, person, city or country.

    Args:
        entity: The entity's exact name.
        field: The fact to return.
    """
    found = world().entities[_resolve(entity)]
    if field not in found.facts:
        raise ValueError(f"{found.name} is a {found.kind}; its fields are {', '.join(FIELDS[found.kind])}")
    return found.facts[field]
