"""SGLang knowledge: launch arguments, host-memory arithmetic, the hicache planner, metrics text."""
