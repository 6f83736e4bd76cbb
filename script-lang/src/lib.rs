//! brisk-script
