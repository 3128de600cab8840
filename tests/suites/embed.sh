#!/usr/bin/env bash
# tests/suites/embed.sh: an application embedding a generated .o through its header (weights inside and external).
exec bash tests/embed/run.sh
