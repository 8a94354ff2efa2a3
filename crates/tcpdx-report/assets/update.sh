#!/usr/bin/env bash
# Refreshes the charting library inlined into the HTML report (tcpdx report): installs
# the version pinned in package-lock.json with npm and copies its built files into
# vendor/, which is committed so that `cargo build` needs no npm. To upgrade: edit the
# version in package.json, run `npm install --package-lock-only`, then this script.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --ignore-scripts
cp node_modules/uplot/dist/uPlot.iife.min.js vendor/uPlot.iife.min.js
cp node_modules/uplot/dist/uPlot.min.css vendor/uPlot.min.css
cp node_modules/uplot/LICENSE vendor/uPlot.LICENSE
node -e 'console.log("uplot", require("./node_modules/uplot/package.json").version)' > vendor/VERSION
rm -rf node_modules
echo "vendor/ updated: $(cat vendor/VERSION)"
