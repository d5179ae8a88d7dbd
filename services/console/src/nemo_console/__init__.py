"""The console: a server-rendered web application for the people around the AI plane."""
