"""The pydet agent (``det-agent``): runs the master's containers on one node.

It keeps one bidirectional gRPC stream to the master (``connection``), runs orders through
a container runtime (``runtime``, ``process_runtime``), and buffers what the master must
hear while it is unreachable (``outbox``). ``daemon`` wires these together.
"""
