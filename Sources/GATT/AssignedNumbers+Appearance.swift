import HCI

extension AssignedNumbers {
    /// "Category" or "Category: Subcategory" for an Appearance value (Assigned Numbers 2.6:
    /// bits 15–6 category, bits 5–0 subcategory). Subcategory 0 is the generic one and is
    /// written as the category alone. An unknown subcategory of a known category gives
    /// "Category: subcategory 0x..". Nil for an unknown category.
    public static func appearanceName(_ value: UInt16) -> String? {
        let category = value >> 6
        let sub = UInt8(value & 0x3F)
        guard let c = appearanceCategoryName(category) else { return nil }
        if sub == 0 { return c }
        if let s = appearanceSubcategoryName(category: category, sub) { return c + ": " + s }
        return c + ": subcategory " + hexCode(sub)
    }

    public static func appearanceCategoryName(_ category: UInt16) -> String? {
        switch category {
        case 0x000: return "Unknown"
        case 0x001: return "Phone"
        case 0x002: return "Computer"
        case 0x003: return "Watch"
        case 0x004: return "Clock"
        case 0x005: return "Display"
        case 0x006: return "Remote Control"
        case 0x007: return "Eye-glasses"
        case 0x008: return "Tag"
        case 0x009: return "Keyring"
        case 0x00A: return "Media Player"
        case 0x00B: return "Barcode Scanner"
        case 0x00C: return "Thermometer"
        case 0x00D: return "Heart Rate Sensor"
        case 0x00E: return "Blood Pressure"
        case 0x00F: return "Human Interface Device"
        case 0x010: return "Glucose Meter"
        case 0x011: return "Running Walking Sensor"
        case 0x012: return "Cycling"
        case 0x013: return "Control Device"
        case 0x014: return "Network Device"
        case 0x015: return "Sensor"
        case 0x016: return "Light Fixtures"
        case 0x017: return "Fan"
        case 0x018: return "HVAC"
        case 0x019: return "Air Conditioning"
        case 0x01A: return "Humidifier"
        case 0x01B: return "Heating"
        case 0x01C: return "Access Control"
        case 0x01D: return "Motorized Device"
        case 0x01E: return "Power Device"
        case 0x01F: return "Light Source"
        case 0x020: return "Window Covering"
        case 0x021: return "Audio Sink"
        case 0x022: return "Audio Source"
        case 0x023: return "Motorized Vehicle"
        case 0x024: return "Domestic Appliance"
        case 0x025: return "Wearable Audio Device"
        case 0x026: return "Aircraft"
        case 0x027: return "AV Equipment"
        case 0x028: return "Display Equipment"
        case 0x029: return "Hearing aid"
        case 0x02A: return "Gaming"
        case 0x02B: return "Signage"
        case 0x031: return "Pulse Oximeter"
        case 0x032: return "Weight Scale"
        case 0x033: return "Personal Mobility Device"
        case 0x034: return "Continuous Glucose Monitor"
        case 0x035: return "Insulin Pump"
        case 0x036: return "Medication Delivery"
        case 0x037: return "Spirometer"
        case 0x051: return "Outdoor Sports Activity"
        default: return nil
        }
    }

    static func appearanceSubcategoryName(category: UInt16, _ sub: UInt8) -> String? {
        switch (category, sub) {
        // Computer
        case (0x002, 0x01): return "Desktop Workstation"
        case (0x002, 0x02): return "Server-class Computer"
        case (0x002, 0x03): return "Laptop"
        case (0x002, 0x04): return "Handheld PC/PDA (clamshell)"
        case (0x002, 0x05): return "Palm-size PC/PDA"
        case (0x002, 0x06): return "Wearable computer (watch size)"
        case (0x002, 0x07): return "Tablet"
        case (0x002, 0x08): return "Docking Station"
        case (0x002, 0x09): return "All in One"
        case (0x002, 0x0A): return "Blade Server"
        case (0x002, 0x0B): return "Convertible"
        case (0x002, 0x0C): return "Detachable"
        case (0x002, 0x0D): return "IoT Gateway"
        case (0x002, 0x0E): return "Mini PC"
        case (0x002, 0x0F): return "Stick PC"
        // Watch
        case (0x003, 0x01): return "Sports Watch"
        case (0x003, 0x02): return "Smartwatch"
        // Thermometer
        case (0x00C, 0x01): return "Ear Thermometer"
        // Heart Rate Sensor
        case (0x00D, 0x01): return "Heart Rate Belt"
        // Blood Pressure
        case (0x00E, 0x01): return "Arm Blood Pressure"
        case (0x00E, 0x02): return "Wrist Blood Pressure"
        // Human Interface Device
        case (0x00F, 0x01): return "Keyboard"
        case (0x00F, 0x02): return "Mouse"
        case (0x00F, 0x03): return "Joystick"
        case (0x00F, 0x04): return "Gamepad"
        case (0x00F, 0x05): return "Digitizer Tablet"
        case (0x00F, 0x06): return "Card Reader"
        case (0x00F, 0x07): return "Digital Pen"
        case (0x00F, 0x08): return "Barcode Scanner"
        case (0x00F, 0x09): return "Touchpad"
        case (0x00F, 0x0A): return "Presentation Remote"
        // Running Walking Sensor
        case (0x011, 0x01): return "In-Shoe Running Walking Sensor"
        case (0x011, 0x02): return "On-Shoe Running Walking Sensor"
        case (0x011, 0x03): return "On-Hip Running Walking Sensor"
        // Cycling
        case (0x012, 0x01): return "Cycling Computer"
        case (0x012, 0x02): return "Speed Sensor"
        case (0x012, 0x03): return "Cadence Sensor"
        case (0x012, 0x04): return "Power Sensor"
        case (0x012, 0x05): return "Speed and Cadence Sensor"
        // Control Device
        case (0x013, 0x01): return "Switch"
        case (0x013, 0x02): return "Multi-switch"
        case (0x013, 0x03): return "Button"
        case (0x013, 0x04): return "Slider"
        case (0x013, 0x05): return "Rotary Switch"
        case (0x013, 0x06): return "Touch Panel"
        // Network Device
        case (0x014, 0x01): return "Access Point"
        case (0x014, 0x02): return "Mesh Device"
        case (0x014, 0x03): return "Mesh Network Proxy"
        // Sensor
        case (0x015, 0x01): return "Motion Sensor"
        case (0x015, 0x02): return "Air quality Sensor"
        case (0x015, 0x03): return "Temperature Sensor"
        case (0x015, 0x04): return "Humidity Sensor"
        case (0x015, 0x05): return "Leak Sensor"
        case (0x015, 0x06): return "Smoke Sensor"
        case (0x015, 0x07): return "Occupancy Sensor"
        case (0x015, 0x08): return "Contact Sensor"
        case (0x015, 0x09): return "Carbon Monoxide Sensor"
        case (0x015, 0x0A): return "Carbon Dioxide Sensor"
        case (0x015, 0x0B): return "Ambient Light Sensor"
        case (0x015, 0x0C): return "Energy Sensor"
        // Power Device
        case (0x01E, 0x01): return "Power Outlet"
        case (0x01E, 0x02): return "Power Strip"
        case (0x01E, 0x03): return "Plug"
        case (0x01E, 0x04): return "Power Supply"
        // Light Source
        case (0x01F, 0x01): return "Incandescent Light Bulb"
        case (0x01F, 0x02): return "LED Lamp"
        // Audio Sink
        case (0x021, 0x01): return "Standalone Speaker"
        case (0x021, 0x02): return "Soundbar"
        case (0x021, 0x03): return "Bookshelf Speaker"
        case (0x021, 0x04): return "Standmounted Speaker"
        case (0x021, 0x05): return "Speakerphone"
        // Audio Source
        case (0x022, 0x01): return "Microphone"
        // Wearable Audio Device
        case (0x025, 0x01): return "Earbud"
        case (0x025, 0x02): return "Headset"
        case (0x025, 0x03): return "Headphones"
        case (0x025, 0x04): return "Neck Band"
        // Hearing aid
        case (0x029, 0x01): return "In-ear hearing aid"
        case (0x029, 0x02): return "Behind-ear hearing aid"
        case (0x029, 0x03): return "Cochlear Implant"
        // Gaming
        case (0x02A, 0x01): return "Home Video Game Console"
        case (0x02A, 0x02): return "Portable handheld console"
        // Pulse Oximeter
        case (0x031, 0x01): return "Fingertip Pulse Oximeter"
        case (0x031, 0x02): return "Wrist Worn Pulse Oximeter"
        // Outdoor Sports Activity
        case (0x051, 0x01): return "Location Display"
        case (0x051, 0x02): return "Location and Navigation Display"
        case (0x051, 0x03): return "Location Pod"
        case (0x051, 0x04): return "Location and Navigation Pod"
        default: return nil
        }
    }
}
