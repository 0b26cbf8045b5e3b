"""Real work-conserving backend on torch devices; built by the real-backend issue."""
