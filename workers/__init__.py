"""The untrusted zone: the box image and the runtime that runs inside it. Never imports the trusted side."""
