// GPU suite for graph capture faults: being written.
