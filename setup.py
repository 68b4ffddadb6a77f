"""Which packages the distribution holds; everything else about it (metadata, package data) is in pyproject.toml.

The repository keeps four rooms that install under one namespace (`agentrl/` → `agentrl`, `tools/` →
`agentrl.tools`, `scaffolds/` → `agentrl.scaffolds`, `rewards/` → `agentrl.rewards`), and pyproject.toml's
`packages.find` cannot put a directory under a package prefix, so the list is made here. It is every directory of
each room: setuptools treats any directory as an importable package, so the data directories (the tiny policies,
the chat templates, the SWE scaffold's bundled repositories, the viewer's static files) are listed on purpose,
and their files ship only where pyproject.toml's package-data names them.
"""

import warnings

from setuptools import find_namespace_packages, setup
from setuptools.warnings import InformationOnly

# Every editable install of a layout other than src/ ends with a notice that folders named like the package may
# shadow it; here each room is mapped to its package explicitly, so the notice has nothing to say.
warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)

ROOMS = {"agentrl": "agentrl", "agentrl.tools": "tools", "agentrl.scaffolds": "scaffolds", "agentrl.rewards": "rewards"}


def room_packages(prefix: str, where: str) -> list[str]:
    found = find_namespace_packages(where, exclude=["*__pycache__*", "*.egg-info*"])
    return [prefix] + [f"{prefix}.{name}" for name in found]


setup(
    packages=[package for prefix, where in ROOMS.items() for package in room_packages(prefix, where)],
    package_dir=ROOMS,
)
