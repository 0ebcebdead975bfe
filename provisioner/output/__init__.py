"""Output: the only place that prints or writes reports (console, JSON, JUnit, Prometheus, files);
foreign text is escaped once where it enters."""
