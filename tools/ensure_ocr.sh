#!/usr/bin/env bash
# Make sure Tesseract (Debian's tesseract-ocr with English data) is installed for the OCR tests. Used by
# `make test`. Installs it with apt-get when missing (needs root, as in CI); otherwise says what to run.
set -euo pipefail
if command -v tesseract >/dev/null 2>&1 && [ -n "$(ls /usr/share/tesseract-ocr/*/tessdata/eng.traineddata 2>/dev/null)" ]; then
    exit 0
fi
echo "ensure_ocr: tesseract or its English data is missing; the OCR tests need them." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure_ocr: installing Debian packages tesseract-ocr tesseract-ocr-eng with apt-get..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null
    echo "ensure_ocr: installed $(tesseract --version 2>&1 | head -1)" >&2
else
    echo "ensure_ocr: not root or no apt-get: run 'sudo apt-get install tesseract-ocr tesseract-ocr-eng';" >&2
    echo "ensure_ocr: the OCR tests will be skipped until then." >&2
fi
