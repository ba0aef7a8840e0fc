"""What the agent runs in a task container: ``python3 -m determined.exec.launch``."""
