"""Reading a model without its weights: the Hub, a local folder or the HF cache (config.json, index, safetensors headers), with retries, error mapping and the header digest cache."""
