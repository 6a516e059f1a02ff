"""What Inspect's `inspect_ai` entry point loads: the task and the sandbox environment register themselves."""

from tbx.sandboxenv import TbxSandbox
from tbx.task import thinkingbox_bench

__all__ = ["TbxSandbox", "thinkingbox_bench"]
