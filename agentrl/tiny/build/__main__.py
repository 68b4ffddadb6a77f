"""`python -m agentrl.tiny.build [--stages ...]`: rebuild the shipped tiny policies (see `stages.py`)."""

from agentrl.tiny.build.stages import main

main()
