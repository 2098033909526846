// GPU suite for graph capture: being written.
