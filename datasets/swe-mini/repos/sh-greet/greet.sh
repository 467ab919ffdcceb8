#!/bin/sh
# Greet the person named by $1, or the world.
echo "Hello, world"
