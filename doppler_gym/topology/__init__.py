"""Device topologies: devices, links, routes, and published presets."""
