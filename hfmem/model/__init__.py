"""Facts from config.json and the headers: the normalised architecture, validation, the tensor inventory, quantized layouts and mixture-of-experts accounting."""
