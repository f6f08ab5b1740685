// The SMP layer.
