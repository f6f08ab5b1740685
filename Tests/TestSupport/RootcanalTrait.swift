import Testing

extension Trait where Self == ConditionTrait {
    /// Enabled only in `make rootcanal-test` (BLE_HCI_ROOTCANAL=1, Tools/rootcanal/run-tests.sh),
    /// which runs every test whose ID contains "Rootcanal": put it on suites and tests that need
    /// Rootcanal, and name them so (`OverRootcanal`, `...Rootcanal...`).
    public static var rootcanal: Self {
        .enabled(if: RootcanalControllers.selected, Comment(rawValue: RootcanalControllers.disabledReason))
    }
}
