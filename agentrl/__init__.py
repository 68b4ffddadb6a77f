"""agentrl: train tool-using LLM agents with reinforcement learning.

Read in this order: `types.py` (the vocabulary), `protocols.py` (the extension points), `scaffolds/react.py`
(one episode), `trainer.py` (the loop as named phases).
"""

from agentrl.reward import Reward, RewardStack, reward
from agentrl.tool import FunctionTool, ToolDefinitionError, ToolError, tool
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn

__all__ = [
    "FunctionTool",
    "Reward",
    "RewardStack",
    "StopReason",
    "Task",
    "ToolCall",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "Trajectory",
    "TrajectoryGroup",
    "Turn",
    "reward",
    "tool",
]
__version__ = "0.1.0"
