"""Learned placement agents (DOPPLER dual policy, Placeto, GDP); built by the agents issue."""
